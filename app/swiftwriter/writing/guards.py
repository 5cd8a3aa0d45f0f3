"""The guards a take is written under, in one place. Against chatter: "Keep to the story" (and
`bench --ban-chatter`) bans the tokens only chatter writes and those that write letters in
scripts the writer does not use (`story_only_bans`, worked out before the take). Against
breakdown: a take whose text reads as word salad under the plain model (surprise by piece), or
has gone to letter or symbol soup, ends there with the reason said (`broke_down`,
`turned_to_soup`), watched by `TakeStream` as the engine writes it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from swiftwriter.engine.decoding.chatter import banned_tokens
from swiftwriter.engine.decoding.scripts import (
    foreign_tokens,
    script,
    scripts_of,
    writers_scripts,
)
from swiftwriter.engine.decoding.textgen import IncrementalDecoder

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from swiftwriter.engine.decoding.generator import StepEvent
    from swiftwriter.writing.endings import TakeEnding
    from swiftwriter.writing.loaded import LoadedModelLike

log = logging.getLogger(__name__)


# -- chatter --------------------------------------------------------------------------------
def story_only_bans(loaded: LoadedModelLike, writers_text: str = "") -> tuple[int, ...]:
    """The loaded model's tokens that "Keep to the story" and `bench --ban-chatter` ban, its
    end-of-text tokens kept: those only chatter writes (headings' "#", bold's "**", code
    fences, chat turn markers: engine/decoding/chatter.py) and those that write letters in
    scripts `writers_text` does not use (engine/decoding/scripts.py: a take that slides into
    Hebrew or katakana soup cannot start it). Worked out once per model and set of scripts."""
    own = writers_scripts(writers_text)
    cache = getattr(loaded, "story_bans", {})  # a LoadedModel's; a stand-in may have none
    if own in cache:
        return cache[own]
    pieces, keep = _pieces_and_ends(loaded)
    bans = tuple(sorted(set(banned_tokens(pieces, keep)) | set(foreign_tokens(pieces, own, keep))))
    cache[own] = bans
    return bans


def _pieces_and_ends(loaded: LoadedModelLike) -> tuple[list[str], set[int]]:
    """Each token's text (as the tokenizer spells it) and the model's end-of-text ids."""
    from swiftwriter.engine.decoding.generator import vocab_size_of  # lazy: torch

    model, tokenizer = loaded.model, loaded.tokenizer
    vocab = vocab_size_of(model)
    if hasattr(tokenizer, "convert_ids_to_tokens"):
        pieces = tokenizer.convert_ids_to_tokens(list(range(min(vocab, len(tokenizer)))))
    else:
        pieces = [tokenizer.decode([i]) for i in range(vocab)]
    eos = model.generation_config.eos_token_id
    keep = {getattr(tokenizer, "eos_token_id", None)}
    keep |= set(eos) if isinstance(eos, list | tuple) else {eos}
    return pieces, {k for k in keep if k is not None}


# -- breakdown ------------------------------------------------------------------------------
# A take whose last BREAKDOWN_PIECES pieces of 512 tokens each read above BREAKDOWN_NATS nats a
# token under the plain model (RunStats.surprise_by_piece) has broken down: word salad or letter
# soup, where this model's prose reads at 1.5-2.5. The take ends there with the reason said,
# rather than writing thousands of words of it into the writer's document.
BREAKDOWN_NATS = 4.0
BREAKDOWN_PIECES = 2


def broke_down(surprise_by_piece) -> bool:
    last = list(surprise_by_piece)[-BREAKDOWN_PIECES:]
    return len(last) == BREAKDOWN_PIECES and min(last) > BREAKDOWN_NATS


# Surprise does not see every breakdown: a take that has turned into letter soup predicts its
# own soup well (the app's kitchen take read at 1.4-3.0 nats a token in Hebrew and full-width
# characters). What gives it away is the script: most of the letters of its last SCRIPT_SPAN
# characters are in scripts its prompt hardly uses.
SCRIPT_SPAN = 2000
SCRIPT_FOREIGN = 0.5


def left_its_scripts(text: str, own: set[str]) -> bool:
    """Whether most letters of the text's last SCRIPT_SPAN characters are in other scripts
    than `own` (judged once SCRIPT_SPAN characters are written)."""
    if len(text) < SCRIPT_SPAN or not own:
        return False
    letters = [c for c in text[-SCRIPT_SPAN:] if c.isalpha()]
    foreign = sum(script(c) not in own for c in letters)
    return bool(letters) and foreign / len(letters) > SCRIPT_FOREIGN


# Nor does it see symbol soup in the writer's own script (the app's 50,000-word take ended in
# ‰, ˜, ※, full-width digits and katakana among Latin capitals): most of its characters are ones
# the writer's text never uses. ASCII is everyone's (a table of figures is no breakdown).
STRANGE_SHARE = 0.3


def strange_share(text: str, own: set[str]) -> float:
    """The share of the visible characters of the text's last SCRIPT_SPAN that are neither
    ASCII nor in `own` (the characters of the writer's text)."""
    visible = [c for c in text[-SCRIPT_SPAN:] if not c.isspace()]
    strange = sum(1 for c in visible if c not in own and not c.isascii())
    return strange / len(visible) if visible else 0.0


def turned_to_soup(text: str, own_scripts: set[str], own_chars: set[str]) -> bool:
    """A take's last SCRIPT_SPAN characters gone to letter or symbol soup (judged once that
    many are written): letters mostly in scripts the writer's text hardly uses, or characters
    mostly ones it never uses."""
    if len(text) < SCRIPT_SPAN:
        return False
    return left_its_scripts(text, own_scripts) or strange_share(text, own_chars) > STRANGE_SHARE


class Streamed(Protocol):
    """What a TakeStream reads of its session (session.PromptSession)."""

    tokenizer: PreTrainedTokenizerBase
    ending: TakeEnding

    def decode(self, ids: list[int]) -> str: ...


class TakeStream:
    """One take's text as the engine writes it: decoded piece by piece (each piece with its
    ids to `keep`, then to `on_text`, every step to `on_step`), watched for breakdown (surprise
    by piece, then letter or symbol soup: `lost`), and its stop reason said at the end."""

    def __init__(self, session: Streamed, prompt: list[int], keep, on_text, on_step):
        self.session, self.keep = session, keep
        self.on_text, self.on_step = on_text, on_step
        self.decoder = IncrementalDecoder(session.tokenizer)
        self.produced: list[int] = []
        self.lost = False  # the text broke down: the take ends at the next step
        writers = session.decode(prompt[-4096:])
        self.own, self.own_chars = scripts_of(writers, least=0.05), set(writers)
        self.recent, self.unchecked = "", 0  # the take's last SCRIPT_SPAN characters

    def push(self, event: StepEvent) -> None:
        self.produced.extend(event.tokens)
        piece = self.decoder.push(event.tokens)
        self.keep(piece, event.tokens)
        if piece and self.on_text is not None:
            self.on_text(piece)
        if self.on_step is not None:
            self.on_step(event)
        self.recent = (self.recent + piece)[-SCRIPT_SPAN:]
        self.unchecked += len(piece)
        self.lost = self.lost or broke_down(getattr(event.run, "surprise_by_piece", ()))
        if self.unchecked >= SCRIPT_SPAN // 4 and len(self.recent) == SCRIPT_SPAN:  # ~1 ms
            self.unchecked = 0
            self.lost = self.lost or turned_to_soup(self.recent, self.own, self.own_chars)

    def finish(self, stats) -> None:
        """The run's stop reason as the writer reads it (`stats`: the engine's RunStats), and
        the text held back at the end."""
        session = self.session
        stats.stop_reason = session.ending.reason(stats.stop_reason, self.produced, session.decode)
        if self.lost:
            stats.stop_reason = "broke_down"
            log.info("take stopped: the text broke down (surprise by piece %s)",
                     stats.surprise_by_piece[-BREAKDOWN_PIECES:])  # fmt: skip
        tail = self.decoder.finish()
        if tail:
            self.keep(tail, ())
            if self.on_text is not None:
                self.on_text(tail)

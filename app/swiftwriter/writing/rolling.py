"""A document's rolling summary, written after a take whose window slid: what slid out (the
document's text and the take's that the model no longer saw) is summarised by the same model,
greedily, in a separate short generation, together with the summary so far, and stored in the
project for that document (store/summaries.py). The document's next takes read it in their
pinned head (context.py), so chapter 12 still knows what happened in chapter 2.

Written after the take, never during it: the take's own tokens cannot depend on it, so
speculation and plain decoding still write one text. What slid out is read in pieces that fit
the window (the take's context limit too), each rolled into the summary in turn. A failure or a
stop leaves the summary as it was and says so in one line; the take itself is already stored."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from swiftwriter.chat_template import has_chat_template, template_ids
from swiftwriter.engine.decoding.generator import context_length
from swiftwriter.engine.decoding.settings import ContextSettings, SamplingSettings
from swiftwriter.errors import UserError
from swiftwriter.writing.endings import TakeEnding
from swiftwriter.writing.history import encoder_of
from swiftwriter.writing.session import PromptSession

log = logging.getLogger(__name__)

SYSTEM = (
    "Summarise the story so far for the writer's own notes: who, where, what has happened, in "
    "a few plain sentences. Keep names, places and promises. Write only the summary."
)
TARGET = 160  # tokens of summary at most
# The summary written takes at most a sixteenth of the window (so it fits the third of the
# next take's budget that the context gives it), the summary so far rolled on an eighth.
WRITE_SHARE = 16
READ_SHARE = 8
LEAST_PIECE = 8  # tokens of slid-out text a summarising prompt must have room for
GREEDY = SamplingSettings(greedy=True, penalty=1.2, window=256)


@dataclass(frozen=True)
class Rolled:
    """What updating a summary did: the new text ("" when nothing was written) and one line
    for the writer."""

    text: str
    line: str
    written: bool = False


def summary_prompt(tokenizer, old: str, piece: str) -> list[int]:
    """The prompt that rolls `piece` (what slid out) into the summary so far `old`: through
    the model's chat template when it has one."""
    before = f"The story so far: {old.strip()}\n\n" if old.strip() else ""
    if has_chat_template(tokenizer):
        user = f"{before}What happened next:\n{piece}"
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
        return template_ids(tokenizer, messages, add_generation_prompt=True)
    return encoder_of(tokenizer)(f"{before}What happened next:\n{piece}\n\nThe story so far:")


def roll(
    loaded,
    old: str,
    slid_ids: list[int],
    context: ContextSettings | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> str | None:
    """The summary `old` with what slid out (`slid_ids`) rolled into it, piece by piece within
    the window; None when stopped."""
    model, tokenizer = loaded.model, loaded.tokenizer
    context = context or ContextSettings()
    window = context.window(context_length(model.config)) or 1 << 20
    ending = TakeEnding(max(LEAST_PIECE, min(TARGET, window // WRITE_SHARE)), stops=("\n\n",))
    target = ending.limit  # the length asked, and the room to end a sentence
    encode = encoder_of(tokenizer)

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=True)

    summary, start = old.strip(), 0
    while start < len(slid_ids):
        if should_stop is not None and should_stop():
            return None
        kept = decode(encode(summary)[-(window // READ_SHARE) :]) if summary else ""
        room = window - target - len(summary_prompt(tokenizer, kept, "")) - 1
        if room < LEAST_PIECE:
            raise UserError(f"a window of {window:,} tokens leaves no room to summarise in")
        piece_ids = slid_ids[start : start + room]
        prompt = summary_prompt(tokenizer, kept, decode(piece_ids))
        while len(prompt) + target >= window and len(piece_ids) > LEAST_PIECE:
            piece_ids = piece_ids[: len(piece_ids) * 3 // 4]  # its text took more tokens back
            prompt = summary_prompt(tokenizer, kept, decode(piece_ids))
        start += len(piece_ids)
        session = PromptSession(
            loaded,
            prompt_ids=prompt,
            sampling=GREEDY,
            context=ContextSettings(limit=context.limit),
            ending=ending,
        )
        result = session.run(should_stop=should_stop)
        if result.stats.get("stop_reason") == "cancelled":
            return None
        summary = result.text.strip() or summary
    return summary


def update_summary(
    project,
    doc_id: int,
    loaded,
    slid_ids: list[int],
    context: ContextSettings | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Rolled:
    """Roll what slid out of a take's window into the document's stored summary (nothing to do
    when the window never slid, or the project has the rolling summary switched off). Never
    raises for a failure to summarise: the summary stays as it was and the line says why."""
    if not slid_ids or not project.rolling_summary:
        return Rolled("", "")
    try:
        old = project.summary(doc_id).text
        new = roll(loaded, old, slid_ids, context, should_stop)
        if new is None:
            line = "Rolling summary not updated: stopped (it is as it was)"
            log.info(line)
            return Rolled("", line)
        project.set_summary(doc_id, new, source="model")
    except Exception as exc:  # a failure to summarise loses nothing: said, and the take is kept
        line = f"Rolling summary not updated (it is as it was): {exc}"
        log.warning(line)
        return Rolled("", line)
    line = f"Rolling summary updated from {len(slid_ids):,} tokens that slid out of the window"
    log.info(line)
    return Rolled(new, line, written=True)

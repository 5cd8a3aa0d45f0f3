"""Selection tools: the writer selects a passage and asks for it rewritten, described in more
sensory detail, expanded, shortened, or changed by their own instruction; the model writes
several alternatives at once and the writer keeps one (or none).

The alternatives are one prompt sampled with one seed each, written together: one model pass
per step verifies every alternative's drafts (engine.decoding.together), so three cost far
less than three takes, and each is exactly the text the model writes alone for its seed (with
the same-text sampler, plain decoding's own text). Nothing here touches a project: the window
puts the chosen text in the document and records it (ui/selection_tools.py)."""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from swiftwriter.chat_template import has_chat_template, template_ids
from swiftwriter.engine.decoding.settings import MODES, DraftSettings, SamplingSettings
from swiftwriter.engine.decoding.textgen import IncrementalDecoder, encode, eos_ids_of
from swiftwriter.errors import UserError

# tool -> (its menu label, the instruction the model reads, tokens per token of the passage)
TOOLS = {
    "rewrite": ("Rewrite", "Rewrite this passage in fresh words, keeping what happens.", 1.3),
    "describe": (
        "Describe",
        "Rewrite this passage with more sensory detail: what is seen, heard, smelt and felt.",
        2.0,
    ),
    "expand": ("Expand", "Expand this passage: the same events, told at greater length.", 2.5),
    "shorten": ("Shorten", "Shorten this passage to about half its length, keeping its core.", 0.7),
    "custom": ("Your instruction", "", 1.6),
}
SYSTEM = (
    "You are a careful fiction editor. Apply the writer's instruction to their passage and "
    "write only the new passage: no title, no comments, no quotation marks around it."
)
PASSAGE_CHARS = 6000  # a selection longer than this is refused: pick a scene, not a chapter
BEFORE_CHARS = 1500  # text before the selection the model reads, for names and voice
COUNT = 3
LIMITS = (32, 1024)  # tokens an alternative may take, at least and at most


@dataclass
class Alternative:
    seed: int
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    stop_reason: str = ""


@dataclass
class AlternativesResult:
    tool: str
    instruction: str
    alternatives: list[Alternative]
    seconds: float  # wall time of the generation (prefill included)
    stats: list[dict]  # each alternative's RunStats.as_dict()
    sampling: dict = field(default_factory=dict)  # the SamplingSettings they were drawn with
    status: str = "finished"  # or "cancelled"


def instruction_for(tool: str, instruction: str = "") -> str:
    """The words the model reads for a tool (a custom tool's are the writer's)."""
    if tool not in TOOLS:
        raise UserError(f"No selection tool called '{tool}': choose one of {', '.join(TOOLS)}")
    if tool == "custom":
        if not instruction.strip():
            raise UserError("Write an instruction for the model, such as 'make it tenser'")
        return instruction.strip()
    return TOOLS[tool][1] + (f" {instruction.strip()}" if instruction.strip() else "")


def selection_prompt(
    tokenizer, tool: str, passage: str, before: str = "", instruction: str = ""
) -> list[int]:
    """The prompt ids: the model's chat template when it has one (system, then the story so
    far, the instruction and the passage), else a plain-text frame a base model continues."""
    passage = passage.strip()
    if not passage:
        raise UserError("Select a passage first: there is nothing to rewrite")
    if len(passage) > PASSAGE_CHARS:
        raise UserError(
            f"The selection has {len(passage):,} characters: select at most {PASSAGE_CHARS:,} "
            "(a scene, not a chapter)"
        )
    words = instruction_for(tool, instruction)
    before = before[-BEFORE_CHARS:].strip()
    context = f"The story so far ends:\n{before}\n\n" if before else ""
    if has_chat_template(tokenizer):
        user = f"{context}{words}\n\nPassage:\n{passage}"
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
        return template_ids(tokenizer, messages, add_generation_prompt=True)
    frame = f"{context}Passage:\n{passage}\n\nInstruction: {words}\n\nNew passage:\n"
    return encode(tokenizer, frame)


def token_budget(tokenizer, tool: str, passage: str) -> int:
    """Tokens an alternative may write: the passage's length times the tool's factor."""
    tokens = len(encode(tokenizer, passage))
    low, high = LIMITS
    return max(low, min(high, int(tokens * TOOLS[tool][2]) + 16))


def alternative_sampling(sampling: SamplingSettings | None) -> SamplingSettings:
    """Alternatives differ by their seeds: a greedy mode would write one text three times, so
    a greedy setting takes Creative's sampling instead."""
    if sampling is None or sampling.greedy:
        return MODES["creative"]
    return sampling


def write_alternatives(
    loaded,
    tool: str,
    passage: str,
    *,
    before: str = "",
    instruction: str = "",
    count: int = COUNT,
    seeds: list[int] | None = None,
    sampling: SamplingSettings | None = None,
    drafting: DraftSettings | None = None,
    max_new_tokens: int | None = None,
    min_new_tokens: int = 0,
    on_text: Callable[[int, str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> AlternativesResult:
    """`count` alternatives of `passage` written together; `on_text(i, piece)` streams each."""
    if not 1 <= count <= 8:
        raise UserError(f"Ask for 1 to 8 alternatives, not {count}")
    # here, not at the top: the tools' names (the CLI's help, the window's menu) load no torch
    from swiftwriter.engine.decoding.generator import Generator  # lazy: torch

    seeds = list(seeds) if seeds is not None else [secrets.randbits(31) for _ in range(count)]
    tokenizer = loaded.tokenizer
    prompt = selection_prompt(tokenizer, tool, passage, before, instruction)
    limit = max_new_tokens or token_budget(tokenizer, tool, passage)
    sampling = alternative_sampling(sampling)
    generator = Generator(
        loaded.model,
        sampling,
        drafting if drafting is not None else DraftSettings(),
        eos_ids=eos_ids_of(tokenizer, loaded.model),
        drafter=getattr(loaded, "drafter", None),
    )
    alternatives = [Alternative(seed) for seed in seeds]
    decoders = [IncrementalDecoder(tokenizer) for _ in seeds]
    t0 = time.perf_counter()
    status = "finished"
    events = generator.generate_together(
        prompt, limit, seeds, should_stop=should_stop, min_new_tokens=min_new_tokens
    )
    for side in events:
        alt, event = alternatives[side.index], side.event
        alt.token_ids.extend(event.tokens)
        piece = decoders[side.index].push(event.tokens)
        if event.done:
            piece += decoders[side.index].finish()
            alt.stop_reason = event.stop_reason
            status = "cancelled" if event.stop_reason == "cancelled" else status
        alt.text += piece
        if piece and on_text is not None:
            on_text(side.index, piece)
    seconds = time.perf_counter() - t0
    for alt in alternatives:
        alt.text = tidy(alt.text, cut=alt.stop_reason == "length")
    stats = [generator.together_stats[i].as_dict() for i in range(len(seeds))]
    words = instruction_for(tool, instruction)
    return AlternativesResult(tool, words, alternatives, seconds, stats, asdict(sampling), status)


SENTENCE_END = re.compile(r"""[.!?…]["'”’)]*(?=\s|$)""")


def tidy(text: str, cut: bool = False) -> str:
    """An alternative as it goes into the document: without the blank edges and the quotation
    marks a chat model may put around a whole passage; `cut` (it ran out of tokens) ends it
    at its last full sentence, where that keeps most of it."""
    text = text.strip()
    if cut:
        ends = [m.end() for m in SENTENCE_END.finditer(text)]
        if ends and ends[-1] >= 0.6 * len(text):
            text = text[: ends[-1]]
    for left, right in (('"', '"'), ("\u201c", "\u201d")):
        inner = text[1:-1]
        whole = text.startswith(left) and text.endswith(right)
        if whole and left not in inner and right not in inner:
            text = inner.strip()
    return text

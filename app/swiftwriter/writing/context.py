"""What the model is given for a take: the story context, assembled from parts within the
model's budget, in this order:

1. memory: the project's "what this book is" (premise, style, characters) and the pinned notes,
   then the lorebook entries that fired (lorebook.py), within the lorebook's budget, then the
   document's rolling summary (what slid out of earlier takes' window, store/summaries.py),
   within a third of the budget;
2. story: the end of the preceding documents in tree order (none, the previous one, or as many
   as fit), each document's synopsis standing in for its text where the writer wrote one;
3. text: the current document before the cursor;
4. direction: what should happen next. Without a chat template it goes in as an author's note
   a few lines above the end of the text (KoboldAI's convention); with one, the context and
   the direction become the user's message and the text the assistant's, which the model
   continues (`apply_chat_template(continue_final_message=True)`). The project's standing
   author's note goes into the text at its depth, either way.

The budget is the model's context less the take's room. The text before the cursor keeps at
least half; memory and the lorebook take at most half, the story what is left. Nothing is cut
silently: each shortened part says what was kept (`ContextPart.shortened`). The context viewer
shows `StoryContext.render()`, and the engine receives exactly `StoryContext.ids`.

Every text is read and tokenized only as far as the budget can use (`fitted`, on a string or on
a stored text read from the project file as far as asked): a 50 MB memory or a 200 MB chapter
costs what a window's worth of it does, where it took minutes and gigabytes to tokenize whole."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from swiftwriter.lorebook import (
    AuthorsNote,
    Lorebook,
    LoreChoice,
    choose,
    entry_text,
    note_at_depth,
    note_line,
)
from swiftwriter.store.texts import Excerpt, string_excerpt

STORY_MODES = ("none", "previous", "fit")
SYSTEM = (
    "You are a writing assistant. Continue the writer's text in the same voice, tense and "
    "style, following their direction for what happens next. Write only the continuation."
)
NOTE_LINES_ABOVE = 3  # the author's note goes this many lines above the end of the text

# A text given to the context: in memory, or stored (read as far as asked: store.excerpts)
Reader = Callable[[int, bool], Excerpt]  # (limit, from the end) -> the excerpt
Source = str | Reader
# How far a text is read: first the characters its tokens typically take (English prose
# averages 4 to 5 a token), then four times as far while that is short of the tokens wanted,
# up to MOST_CHARS_PER_TOKEN a token (more than any token holds: SmolLM2's longest is 81).
FIRST_CHARS_PER_TOKEN = 8
MOST_CHARS_PER_TOKEN = 128
CUT_TOKENS = 8  # tokens dropped where a text was cut: the word cut in two tokenizes otherwise
SUMMARY_SHARE = 3  # the rolling summary takes at most this fraction of the budget (a third)
SUMMARY_LABEL = "rolling summary of this document (what slid out of earlier takes' window)"


def summary_block(summary: str) -> str:
    """How a document's rolling summary enters the prompt."""
    return f"Story so far: {summary.strip()}\n\n" if summary.strip() else ""


@dataclass(frozen=True)
class Fitted:
    """What of a text can fit: its last (or first) ids, the part of it that was read."""

    ids: list[int]
    text: str  # the part read and tokenized (the whole text where `cut` is False)
    total: int  # the whole text's tokens; where it was cut, estimated from the part read
    cut: bool


def fitted(
    encode: Callable[[str], list[int]],
    source: Source,
    room: int,
    end: bool = True,
    shape: Callable[[str], str] | None = None,
) -> Fitted:
    """The `room` tokens at the end (or the start) of a text, read and tokenized only as far
    as they reach, however long the text: a 50 MB prompt or a 200 MB chapter costs what a
    window's worth of it does. `shape` is applied to the part read before it is tokenized (an
    author's note put in, a piece's own whitespace taken off)."""
    read = source if callable(source) else functools.partial(string_excerpt, source)
    want = max(room, 0) + CUT_TOKENS
    limit = want * FIRST_CHARS_PER_TOKEN
    while True:
        part = read(limit, end)
        text = shape(part.text) if shape is not None else part.text
        ids = encode(text) if text else []
        if part.whole:
            return Fitted(_side(ids, room, end), text, len(ids), False)
        if len(ids) >= want or limit >= want * MOST_CHARS_PER_TOKEN:
            body = ids[CUT_TOKENS:] if end else ids[: max(0, len(ids) - CUT_TOKENS)]
            total = max(len(body), round(len(ids) * part.size / max(part.read, 1)))
            return Fitted(_side(body, room, end), text, total, True)
        limit *= 4


def _side(ids: list[int], room: int, end: bool) -> list[int]:
    """The last (or first) `room` ids."""
    if room <= 0:
        return []
    return ids[-room:] if end else ids[:room]


@dataclass
class ContextPart:
    name: str  # memory, lore, story, text, note, direction
    label: str
    ids: list[int]
    text: str = ""
    shortened: str = ""  # what was cut, in words a writer reads ("" when nothing was)
    details: list[str] = field(default_factory=list)  # lines under the heading (why entries fired)


@dataclass
class StoryContext:
    parts: list[ContextPart]
    ids: list[int]  # what the engine receives (wrapped by the chat template where one is used)
    pinned: int = 0  # how many leading ids a sliding window keeps (the memory part)
    wrapped: bool = False
    notes: list[str] = field(default_factory=list)
    wrapped_text: str = ""  # the whole prompt as the chat template laid it out
    lore: LoreChoice | None = None  # the lorebook entries that fired, and why

    def render(self) -> str:
        """One read-only text with the parts marked and their token counts."""
        out = []
        for part in self.parts:
            head = f"=== {part.label} ({len(part.ids):,} tokens)"
            if part.shortened:
                head += f"; {part.shortened}"
            out.append(head + " ===")
            out.extend(f"  · {line}" for line in part.details)
            out.append(part.text)
        if self.wrapped:
            out.append(f"=== as the model sees it: wrapped by its chat template "
                       f"({len(self.ids):,} tokens) ===")  # fmt: skip
            out.append(self.wrapped_text)
        out.append(f"=== total: {len(self.ids):,} tokens ===")
        return "\n".join(out)


def _keep_end(ids: list[int], room: int) -> list[int]:
    return ids[len(ids) - room :] if room > 0 else []


def _shortened(kept: int, total: int, where: str, estimated: bool = False) -> str:
    if kept >= total:
        return ""
    about = "about " if estimated else ""
    return f"kept the {where} {kept:,} of {about}{total:,} tokens"


def with_authors_note(text: str, direction: str) -> str:
    """The direction as an author's note a few lines above the end of the text."""
    lines = text.split("\n")
    at = max(0, len(lines) - NOTE_LINES_ABOVE)
    return "\n".join(lines[:at] + [note_line(direction)] + lines[at:])


def assemble(
    encode: Callable[[str], list[int]],
    budget: int,
    memory: Source,
    story: Sequence[tuple[str, Source, Source]],
    text: Source,
    direction: str = "",
    mode: str = "fit",
    chat: Callable[[list[dict]], list[int]] | None = None,
    decode: Callable[[list[int]], str] | None = None,
    lore: Lorebook | None = None,
    note: AuthorsNote | None = None,
    summary: str = "",
) -> StoryContext:
    """The parts within `budget` tokens. `story`: the preceding documents in tree order as
    (title, text, synopsis); `chat`: the tokenizer's chat template (messages -> ids) when the
    model has one, used when a direction is given (with `decode`, ids -> text); `lore`: the
    project's lorebook, its keys searched in `text` and the direction; `note`: the standing
    author's note; `summary`: the document's rolling summary, pinned after memory and lore. Every
    text is a string or a stored text's `Reader`, and is read and
    tokenized only as far as the budget can use (`fitted`)."""
    if mode not in STORY_MODES:
        raise ValueError(f"story context must be one of {STORY_MODES}, not {mode!r}")
    direction = direction.strip()
    use_chat = bool(direction) and chat is not None and decode is not None
    note = note if note is not None and note.text.strip() else None
    text_fit = _fit_text(encode, text, budget, note, direction, use_chat)
    head = _head(encode, budget, memory, summary, lore, text, direction, len(text_fit.ids))
    story_fits = _read_story(encode, _story_pieces(story, mode), budget)
    story_total = sum(fit.total for _, fit in story_fits if fit is not None)
    # The text keeps at least half; the story gets what memory, lore and the text leave.
    text_room = max(budget // 2, budget - len(head.ids) - story_total)
    text_kept = _keep_end(text_fit.ids, min(len(text_fit.ids), text_room))
    story_room = max(0, budget - len(head.ids) - len(text_kept))
    story_kept, story_text, dropped = _fit_story(story_fits, story_room)
    parts = _head_parts(head, summary)
    if story_fits:
        parts.append(_story_part(story_fits, story_total, story_kept, story_text, dropped))
    parts.append(ContextPart("text", "this document before the cursor", text_kept, text_fit.text,
                             _shortened(len(text_kept), text_fit.total, "last", text_fit.cut)))  # fmt: skip
    parts += _instruction_parts(encode, note, direction, use_chat)
    ids = head.ids + story_kept + text_kept
    if use_chat:
        ids = _wrapped(chat, decode, head.ids, story_kept, text_kept, direction, budget)
    notes = [f"{p.label}: {p.shortened}" for p in parts if p.shortened]
    pinned = 0 if use_chat else len(head.ids)  # a wrapped prompt has no memory prefix
    shown = decode(ids) if use_chat else ""
    return StoryContext(parts, ids, pinned=pinned, wrapped=use_chat, notes=notes,
                        wrapped_text=shown, lore=head.chosen)  # fmt: skip


def _fit_text(encode, text, budget: int, note, direction: str, use_chat: bool) -> Fitted:
    """The text's end within the budget, with the standing note at its depth and, without the
    chat template, the take's direction as an author's note last."""
    noted = direction and not use_chat

    def shaped(part: str) -> str:
        part = note_at_depth(part, note.text, note.depth) if note else part
        return with_authors_note(part, direction) if noted else part

    return fitted(encode, text, budget, shape=shaped if note or noted else None)


@dataclass
class _Head:
    """What a sliding window keeps: memory (and the pinned notes), the lorebook entries that
    fired and the rolling summary, each as far as its room allows."""

    memory: Fitted
    memory_ids: list[int]  # memory's tokens as read ([] when it is blank)
    memory_kept: list[int]
    summary: Fitted
    chosen: LoreChoice | None
    lore_ids: list[int]

    @property
    def ids(self) -> list[int]:
        return self.memory_kept + self.lore_ids + self.summary.ids


def _head(encode, budget: int, memory, summary: str, lore, text, direction, text_tokens) -> _Head:
    """Memory within at most half the budget when the text is long, then the summary within its
    share, then the lorebook in what room is left."""
    memory_fit = fitted(encode, memory, budget, end=False)
    memory_ids = memory_fit.ids if memory_fit.text.strip() or memory_fit.cut else []
    memory_room = max(budget // 2, budget - text_tokens)  # at most half when text is long
    memory_kept = memory_ids[:memory_room]
    summary_room = min(budget // SUMMARY_SHARE, memory_room - len(memory_kept))
    summary_fit = fitted(encode, summary_block(summary), summary_room, end=False)
    scanned = _tail(text, lore.scan + SCAN_MARGIN) if lore is not None else ""
    lore_room = memory_room - len(memory_kept) - len(summary_fit.ids)
    chosen, lore_ids = _lore(lore, scanned, direction, encode, lore_room)
    return _Head(memory_fit, memory_ids, memory_kept, summary_fit, chosen, lore_ids)


def _head_parts(head: _Head, summary: str) -> list[ContextPart]:
    """The memory, lore and summary parts, each saying what of it was left out."""
    parts = []
    if head.memory_ids:
        memory = head.memory
        cut = _shortened(len(head.memory_kept), memory.total, "first", memory.cut)
        parts.append(ContextPart("memory", "memory and pinned notes", head.memory_kept,
                                 memory.text, cut))  # fmt: skip
    if head.chosen is not None:
        parts.append(_lore_part(head.chosen, head.lore_ids))
    if summary.strip():
        fit = head.summary
        cut = _shortened(len(fit.ids), fit.total, "first", fit.cut)
        parts.append(ContextPart("summary", SUMMARY_LABEL, fit.ids, fit.text, cut))
    return parts


def _story_part(story_fits, story_total: int, kept: list[int], text: str, dropped) -> ContextPart:
    """The earlier documents' part, saying how far they were cut and which were left out."""
    cut = any(fit is not None and fit.cut for _, fit in story_fits)
    shortened = _shortened(len(kept), story_total, "last", cut)
    if dropped:
        shortened = (shortened + "; " if shortened else "") + f"left out: {', '.join(dropped)}"
    return ContextPart("story", "earlier documents", kept, text, shortened)


def _instruction_parts(encode, note, direction: str, use_chat: bool) -> list[ContextPart]:
    """The standing author's note and the take's direction, as the viewer shows them."""
    parts = []
    if note:
        where = f"standing author's note, {note.depth} paragraphs above the end of the text"
        parts.append(ContextPart("note", where, encode(note.text.strip()), note.text.strip()))
    if direction:
        how = "the chat template's user message" if use_chat else "an author's note in the text"
        parts.append(ContextPart("direction", f"direction ({how})", encode(direction), direction))
    return parts


SCAN_MARGIN = 64  # characters read before the lorebook's window: its first word may be cut


def _tail(source: Source, chars: int) -> str:
    """The last `chars` characters of a text (a stored one read only that far)."""
    if isinstance(source, str):
        return source[-chars:]
    return source(chars, True).text


def _lore(book, text, direction, encode, room) -> tuple[LoreChoice | None, list[int]]:
    """The lorebook's choice (None without entries) and the fired entries' ids, each entry
    encoded apart, as counted against the budget."""
    if book is None or not book.entries:
        return None, []
    encoded: dict[str, list[int]] = {}

    def count(piece: str) -> int:
        if piece not in encoded:
            encoded[piece] = encode(piece)
        return len(encoded[piece])

    chosen = choose(book, text, direction, count, room)
    return chosen, [t for f in chosen.fired for t in encoded[entry_text(f.entry)]]


def _lore_part(chosen: LoreChoice, ids: list[int]) -> ContextPart:
    """The fired entries' text, with a line per entry saying why it fired."""
    details = [f"keys searched in the last {chosen.scanned:,} characters before the cursor and "
               f"the direction; budget {chosen.budget:,} tokens"]  # fmt: skip
    details += [f.describe() for f in chosen.fired] or ["no entry fired"]
    details += [f"{f.describe()}: left out, past the budget" for f in chosen.left_out]
    cut = ""
    if chosen.left_out:
        cut = "left out past the budget: " + ", ".join(f.entry.title for f in chosen.left_out)
    text = "".join(entry_text(f.entry) for f in chosen.fired)
    return ContextPart("lore", "lorebook entries that fired", ids, text, cut, details)


def _story_pieces(story, mode: str) -> list[tuple[str, Source]]:
    """(title, what enters the prompt: the synopsis, else the text) per earlier document with
    either, nearest last."""
    chosen = [] if mode == "none" else list(story)[-1:] if mode == "previous" else list(story)
    pieces = []
    for title, body, synopsis in chosen:
        piece = body if _blank(synopsis) else synopsis
        if not _blank(piece):
            pieces.append((title, piece))
    return pieces


BLANK_PEEK = 4096  # characters (or bytes) of a stored text looked at to see that it is blank


def _blank(source: Source) -> bool:
    if isinstance(source, str):
        return not source.strip()
    part = source(BLANK_PEEK, True)
    return part.whole and not part.text.strip()


def _piece(text: str) -> str:
    return text.strip() + "\n\n"  # each earlier document apart, as read


def _read_story(encode, pieces, budget: int) -> list[tuple[str, Fitted | None]]:
    """Each piece read and tokenized as far as the budget reaches, the nearest first; those
    beyond it are not read at all (None)."""
    fits: list[tuple[str, Fitted | None]] = []
    total = 0
    for title, source in reversed(pieces):
        fit = fitted(encode, source, budget - total, shape=_piece) if total < budget else None
        total += fit.total if fit is not None else 0
        fits.insert(0, (title, fit))
    return fits


def _fit_story(fits, room: int) -> tuple[list[int], str, list[str]]:
    """The nearest documents first, each kept whole or (the farthest one kept) by its end."""
    kept_ids: list[list[int]] = []
    kept_text: list[str] = []
    dropped: list[str] = []
    for title, fit in reversed(fits):
        if room <= 0 or fit is None or not fit.ids:
            dropped.append(title)
            continue
        take = _keep_end(fit.ids, min(room, len(fit.ids)))
        room -= len(take)
        kept_ids.insert(0, take)
        text = fit.text.strip()
        whole = not fit.cut and len(take) == len(fit.ids)
        kept_text.insert(0, text if whole else f"[…] {text[-len(take) * 4 :]}")
    return [t for ids in kept_ids for t in ids], "\n\n".join(kept_text), list(reversed(dropped))


def _wrapped(chat, decode, memory_ids, story_ids, text_ids, direction, budget) -> list[int]:
    """System instruction, the context and direction as the user's message, the text as the
    assistant's to continue; kept within the budget by shortening the story first."""

    def text_of(ids: list[int]) -> str:
        return decode(ids) if ids else ""

    def messages(story: list[int]) -> list[dict]:
        context = "\n\n".join(x.strip() for x in (text_of(memory_ids), text_of(story)) if x.strip())
        user = (context + "\n\n" if context else "") + f"What happens next: {direction}"
        return [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": user},
            {"role": "assistant", "content": text_of(text_ids)},
        ]

    ids = chat(messages(story_ids))
    while len(ids) > budget and story_ids:
        story_ids = story_ids[len(story_ids) // 2 :] if len(story_ids) > 1 else []
        ids = chat(messages(story_ids))
    return ids

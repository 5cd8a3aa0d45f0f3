"""The lorebook's part of a take's prompt: which entries enter it and why, and where the
standing author's note goes. Pure text in, choices out (no Qt, no torch, no store), so the
story context and its tests share it.

An enabled entry fires when it is pinned, or when one of its keys appears as a whole word, in
any case (both case-folded), in the scanned window: the last `scan` characters of the text before the cursor,
and the take's direction. Keys are plain words or phrases, never patterns, so a match costs
time linear in the window whatever a key holds. The fired entries are taken by priority
(highest first, then the oldest) while they fit the budget; from the first that does not,
the rest are left out and listed, so a lower priority never displaces a higher one."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

DEFAULT_SCAN = 2000  # characters before the cursor searched for keys
DEFAULT_BUDGET = 512  # tokens the fired entries may take together
DEFAULT_NOTE_DEPTH = 3  # the author's note sits above this many paragraphs
SCAN_RANGE = (100, 100_000)
BUDGET_RANGE = (0, 100_000)
DEPTH_RANGE = (1, 100)


@dataclass(frozen=True)
class Lorebook:
    """What a take needs of the project's lorebook. `entries`: objects with id, title, keys,
    content, pinned, priority and enabled (store.LoreEntry)."""

    entries: Sequence = ()
    scan: int = DEFAULT_SCAN
    budget: int = DEFAULT_BUDGET


@dataclass(frozen=True)
class AuthorsNote:
    """A standing direction for every take, placed `depth` paragraphs above the end of the
    text (the take's own direction comes on top of it)."""

    text: str = ""
    depth: int = DEFAULT_NOTE_DEPTH


@dataclass(frozen=True)
class Fired:
    entry: object
    why: str  # 'pinned', or the key found: 'key "Elena"'
    tokens: int

    def describe(self) -> str:
        return f"{self.entry.title}: {self.why}, {self.tokens:,} tokens"


@dataclass
class LoreChoice:
    fired: list[Fired] = field(default_factory=list)  # in the prompt, in this order
    left_out: list[Fired] = field(default_factory=list)  # fired, but past the budget
    budget: int = 0
    scanned: int = 0  # characters of the text before the cursor that were searched

    def tokens(self) -> int:
        return sum(f.tokens for f in self.fired)


def entry_text(entry) -> str:
    """What a fired entry puts into the prompt."""
    return entry.content.strip() + "\n\n"


def scanned_window(text: str, chars: int) -> str:
    """The last `chars` characters of `text`, less a word cut in two at its start (its tail
    could otherwise match a shorter key: "lena" in "Elena")."""
    if len(text) <= chars:
        return text
    window = text[len(text) - chars :]
    if re.match(r"\w", text[len(text) - chars - 1]):
        cut = re.match(r"\w*", window)
        window = window[cut.end() :]
    return window


_WORD = re.compile(r"\w+")


@functools.lru_cache(maxsize=4096)
def _whole_word(folded_key: str) -> re.Pattern:
    return re.compile(rf"(?<!\w){re.escape(folded_key)}(?!\w)")


class Scanned:
    """The window case-folded, and its words: a one-word key is one set look-up, a phrase a
    substring test before its word bounds are checked (most keys are absent)."""

    def __init__(self, window: str):
        self.folded = window.casefold()
        self.words = set(_WORD.findall(self.folded))

    def holds(self, key: str) -> bool:
        wanted = key.strip().casefold()
        if not wanted:
            return False
        if _WORD.fullmatch(wanted):
            return wanted in self.words
        return wanted in self.folded and _whole_word(wanted).search(self.folded) is not None


def why_fired(entry, scanned: Scanned) -> str:
    """'pinned', 'key "…"' for the entry's first key in the window, or '' when it does not
    fire."""
    if entry.pinned:
        return "pinned"
    key = next((k for k in entry.keys if scanned.holds(k)), None)
    return f'key "{key}"' if key is not None else ""


def choose_entries(
    entries: Iterable, window: str, budget: int, count: Callable[[str], int]
) -> tuple[list[Fired], list[Fired]]:
    """(fired entries within `budget` tokens by priority, fired ones left out past it);
    `count` gives the tokens of a text."""
    matched = []
    scanned = Scanned(window)
    for entry in sorted(entries, key=lambda e: (-e.priority, e.id)):
        if entry.enabled and entry.content.strip():
            why = why_fired(entry, scanned)
            if why:
                matched.append((entry, why))
    fired: list[Fired] = []
    left_out: list[Fired] = []
    room = budget
    for entry, why in matched:
        tokens = count(entry_text(entry))
        if left_out or tokens > room:
            left_out.append(Fired(entry, why, tokens))
        else:
            room -= tokens
            fired.append(Fired(entry, why, tokens))
    return fired, left_out


def choose(
    book: Lorebook, text: str, direction: str, count: Callable[[str], int], room: int
) -> LoreChoice:
    """The entries for a take whose text before the cursor is `text`, within the lorebook's
    budget and the `room` the story context leaves it."""
    window = scanned_window(text, book.scan)
    budget = max(0, min(book.budget, room))
    searched = window + ("\n" + direction.strip() if direction.strip() else "")
    fired, left_out = choose_entries(book.entries, searched, budget, count)
    return LoreChoice(fired, left_out, budget, len(window))


def note_at_depth(text: str, note: str, depth: int) -> str:
    """`note` as an author's note on its own line above the last `depth` paragraphs (lines
    with text) of `text`."""
    lines = text.split("\n")
    at, seen = len(lines), 0
    while at > 0 and seen < depth:
        at -= 1
        seen += bool(lines[at].strip())
    return "\n".join(lines[:at] + [note_line(note)] + lines[at:])


def note_line(note: str) -> str:
    return f"[Author's note: {note.strip()}]"

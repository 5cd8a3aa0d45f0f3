"""Project-wide search: every match of a phrase in the project's documents, in tree order,
with a snippet for the results list, then the lorebook entries that hold it. Plain text in,
positions out: no Qt, no torch."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

SNIPPET = 40  # characters of context on each side of a match


@dataclass(frozen=True)
class Match:
    doc_id: int | None  # None for a lorebook entry's match
    title: str
    start: int  # character offsets into the document's text
    end: int
    snippet: str
    lore_id: int | None = None  # the lorebook entry holding it


def pattern(needle: str, case: bool = False, whole_words: bool = False) -> re.Pattern:
    """The phrase as a regular expression: literal, optionally case-sensitive and bounded by
    non-word characters (as the editor's whole-word find is)."""
    body = re.escape(needle)
    if whole_words:
        body = rf"(?<!\w){body}(?!\w)"
    return re.compile(body, 0 if case else re.IGNORECASE)


def find_in_documents(
    documents: Iterable, needle: str, case: bool = False, whole_words: bool = False
) -> list[Match]:
    """Matches in each document (objects with id, title, text), in the order given."""
    if not needle:
        return []
    regex = pattern(needle, case, whole_words)
    out = []
    for doc in documents:
        text = doc.text or ""
        for m in regex.finditer(text):
            out.append(Match(doc.id, doc.title, m.start(), m.end(), _snippet(text, m)))
    return out


def find_in_lore(
    entries: Iterable, needle: str, case: bool = False, whole_words: bool = False
) -> list[Match]:
    """One match per lorebook entry (objects with id, title, keys, content) whose title, keys
    or text hold the phrase, with the first match's snippet; offsets are into that text."""
    if not needle:
        return []
    regex = pattern(needle, case, whole_words)
    out = []
    for entry in entries:
        text = "\n".join((entry.title, ", ".join(entry.keys), entry.content))
        m = regex.search(text)
        if m is not None:
            out.append(Match(None, entry.title, m.start(), m.end(), _snippet(text, m), entry.id))
    return out


def _snippet(text: str, m: re.Match) -> str:
    """The match in [brackets] with up to SNIPPET characters each side, on its own line, cut
    at whole words (… where cut)."""
    start, end = m.start(), m.end()
    before = text[max(0, start - SNIPPET) : start]
    if "\n" in before:
        before = before.rsplit("\n", 1)[1]
    elif start > SNIPPET and " " in before:
        before = "…" + before.split(" ", 1)[1]
    after = text[end : end + SNIPPET]
    if "\n" in after:
        after = after.split("\n", 1)[0]
    elif end + SNIPPET < len(text) and " " in after:
        after = after.rsplit(" ", 1)[0] + "…"
    return f"{before}[{m.group(0)}]{after}".strip()


def utf16_offset(text: str, index: int) -> int:
    """A character offset as Qt counts it (UTF-16 code units: characters beyond the basic
    plane, such as most emoji, count twice)."""
    return len(text[:index].encode("utf-16-le")) // 2

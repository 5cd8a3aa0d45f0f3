"""Stored texts as text: a column may hold bytes rather than text (a file edited by another
tool, or damaged). They are read as UTF-8 where they decode; where they do not, the bytes that
are not UTF-8 become U+FFFD, said once in one line naming the text, and the work goes on.

`Excerpt` is part of a long text (its end or its beginning, excerpts.py reads them from the
file), in the one type the story context takes for stored and in-memory texts alike."""

from __future__ import annotations

import codecs
import logging
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)
_said: set[str] = set()  # texts already said to hold bytes that are not UTF-8: once each


@dataclass(frozen=True)
class Excerpt:
    """The last (or first) whole characters of a text within a limit: `read` is what they took
    and `size` what the whole text takes, in one unit (bytes stored, or characters)."""

    text: str
    read: int
    size: int

    @property
    def whole(self) -> bool:
        return self.read >= self.size


def string_excerpt(text: str, limit: int, end: bool = True) -> Excerpt:
    """An excerpt of a text in memory, in characters."""
    part = (text[-limit:] if end else text[:limit]) if limit > 0 else ""
    return Excerpt(part, len(part), len(text))


def as_text(value, name: Callable[[], str]) -> str:
    """A stored text value as text: bytes decoded as UTF-8 (U+FFFD, said once, for bytes that
    are not); `name()` says which text it is, for that line."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray | memoryview):
        return decoded(bytes(value), name)
    return str(value)


def decoded(raw: bytes, name: Callable[[], str], final: bool = True) -> str:
    """`raw` as UTF-8; a character left unfinished at its end stays out unless `final`."""
    try:
        return codecs.getincrementaldecoder("utf-8")("strict").decode(raw, final=final)
    except UnicodeDecodeError:
        said = name()
        if said not in _said:
            _said.add(said)
            log.warning("%s holds bytes that are not UTF-8 text: read with \ufffd in their place",
                        said)  # fmt: skip
        return codecs.getincrementaldecoder("utf-8")("replace").decode(raw, final=final)


def after_cut(raw: bytes) -> bytes:
    """`raw` from its first whole character (a cut may fall inside one: up to 3 bytes in)."""
    skip = 0
    while skip < min(3, len(raw)) and 0x80 <= raw[skip] < 0xC0:
        skip += 1
    return raw[skip:]

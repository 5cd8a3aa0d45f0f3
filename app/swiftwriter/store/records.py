"""Plain records the store hands out (never live rows), and the token-id blob format."""

from __future__ import annotations

import json
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from swiftwriter.errors import UserError

DOCUMENT_KINDS = ("part", "chapter", "scene", "section", "document")


class ProjectError(UserError):
    """A project file that cannot be used as asked: the message says why and what to do."""


class ProjectLockedError(ProjectError):
    """Another SwiftWriter has the project open for writing; it can still be opened read-only."""

    def __init__(self, message: str, holder=None):
        super().__init__(message)
        self.holder = holder


def check_id(value, what: str = "document") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ProjectError(f"A {what} id must be a positive whole number, not {value!r}")
    return value


def check_text(value, what: str) -> str:
    if not isinstance(value, str):
        raise ProjectError(f"The {what} must be text, not {type(value).__name__}")
    return value


def check_title(value, what: str = "document") -> str:
    title = check_text(value, f"{what} title").strip()
    if not title:
        raise ProjectError(f"A {what} needs a title")
    if len(title) > 1000:
        raise ProjectError(f"A {what} title may have at most 1000 characters, not {len(title)}")
    return title


@dataclass(frozen=True)
class Document:
    id: int
    parent_id: int | None
    kind: str
    title: str
    text: str
    position: int
    depth: int = 0
    created: str = ""
    modified: str = ""
    synopsis: str = ""  # the writer's (or the model's) short account of the text


@dataclass(frozen=True)
class Snapshot:
    id: int
    doc_id: int
    title: str
    text: str
    reason: str
    created: str


@dataclass(frozen=True)
class Note:
    id: int
    title: str
    text: str
    pinned: bool
    position: int
    created: str = ""
    modified: str = ""


@dataclass(frozen=True)
class LoreEntry:
    """A lorebook (world info) entry: its text enters the prompt when one of its keys appears in
    the text before the cursor, or on every take when pinned."""

    id: int
    title: str
    keys: tuple[str, ...]
    content: str
    pinned: bool = False
    priority: int = 0  # higher first, when the lorebook's budget cannot hold them all
    enabled: bool = True
    created: str = ""
    modified: str = ""


@dataclass(frozen=True)
class Generation:
    id: int
    doc_id: int
    snapshot_id: int | None
    prompt_hash: str
    model_id: str
    tokenizer_id: str
    settings: dict
    stats: dict
    text: str
    n_tokens: int
    status: str
    error: str | None
    applied: bool
    started: str
    finished: str | None
    token_ids: list[int] | None = field(default=None, repr=False)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def pack_ids(ids: Sequence[int]) -> bytes:
    """Token ids as little-endian uint32: 4 bytes a token, the same on every machine."""
    try:
        arr = array("I", ids)
    except OverflowError as exc:
        raise ProjectError("Token ids must be whole numbers from 0 to 4294967295") from exc
    if sys.byteorder == "big":  # pragma: no cover
        arr.byteswap()
    return arr.tobytes()


def unpack_ids(blob: bytes | None) -> list[int]:
    if not blob:
        return []
    arr = array("I")
    arr.frombytes(blob[: len(blob) // 4 * 4])  # a damaged, cut record keeps its whole ids
    if sys.byteorder == "big":  # pragma: no cover
        arr.byteswap()
    return arr.tolist()


def to_json(value) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ProjectError(f"Cannot store this value (not plain JSON data): {exc}") from exc


def from_json(text: str | None, default=None):
    if text is None:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default

"""Naming what went wrong with the disk under a project, so a writer is never told a healthy
file is damaged: a full disk (ENOSPC, EDQUOT, SQLITE_FULL, or an SQLite I/O error while the
disk has no room) says so with the file named, and a rollback journal left by a killed write
(a "hot journal") is rolled back as SQLite intends, not taken for damage."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from pathlib import Path

FULL_ERRNOS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
LOW_SPACE = 256 * 1024  # below this an SQLite I/O error is taken for a full disk
_APP_ID_OFFSET = 68  # where the SQLite header keeps PRAGMA application_id


def _space_left(path: Path) -> int | None:
    with contextlib.suppress(OSError, AttributeError):
        st = os.statvfs(Path(path).parent)
        return st.f_bavail * st.f_frsize
    return None


def is_disk_full(exc: BaseException, path: Path) -> bool:
    """Whether `exc`, raised while reading or writing the project at `path`, means no room."""
    if isinstance(exc, OSError):
        return exc.errno in FULL_ERRNOS
    if isinstance(exc, sqlite3.Error):
        code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
        if code == sqlite3.SQLITE_FULL:
            return True
        if code == sqlite3.SQLITE_IOERR:
            left = _space_left(path)
            return left is not None and left < LOW_SPACE
    return False


def full_message(path: Path, doing: str, then: str = "free some space and try again") -> str:
    """One line: what could not be done, that the disk is full, and where."""
    return f"{doing} {Path(path).name}: the disk is full ({Path(path).absolute().parent}); {then}"


def explain(exc: BaseException, path: Path, doing: str) -> str | None:
    """The writer's line for a full disk or an unfinished rollback, else None (the caller's own
    message stands)."""
    if is_disk_full(exc, path):
        return full_message(path, doing, "it was left untouched: free some space and try again")
    if isinstance(exc, sqlite3.Error) and has_hot_journal(path):
        return (
            f"{Path(path).name} has an unfinished change in {journal_of(path).name}, which is "
            "rolled back when it is opened for writing: open it so (it was left untouched)"
        )
    return None


def journal_of(path: Path) -> Path:
    return Path(f"{path}-journal")


def has_hot_journal(path: Path) -> bool:
    """A non-empty `-journal` beside the project: a rollback-mode write that never finished."""
    try:
        return journal_of(path).stat().st_size > 0
    except OSError:
        return False


def roll_back_hot_journal(path: Path, app_id: int) -> None:
    """Let SQLite roll back a hot journal (the caller holds the project's lock), restoring the
    file as it was before the killed write. Only for a file whose header says it is a
    SwiftWriter project: a foreign file is never written."""
    if not has_hot_journal(path):
        return
    try:
        with open(path, "rb") as fh:
            header = fh.read(100)
    except OSError:
        return
    if int.from_bytes(header[_APP_ID_OFFSET : _APP_ID_OFFSET + 4], "big") != app_id:
        return
    conn = sqlite3.connect(path)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # reading rolls back
    finally:
        conn.close()

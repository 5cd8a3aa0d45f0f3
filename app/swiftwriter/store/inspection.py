"""A look at a project file that never writes to it: its header, a read-only connection, and
its format checked, so a damaged, foreign or newer file is refused and left as it was. The
project (opening) and the backups (restoring, copying before a migration) both start here."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from swiftwriter.store import diskfaults, schema
from swiftwriter.store.records import ProjectError

SQLITE_MAGIC = b"SQLite format 3\x00"


def read_header(path: Path) -> bytes:
    if not path.exists():
        raise ProjectError(f"No such project: {path}")
    if not path.is_file():
        raise ProjectError(f"{path} is not a file")
    try:
        with open(path, "rb") as fh:
            return fh.read(100)
    except OSError as exc:
        raise ProjectError(f"Cannot read {path}: {exc.strerror or exc}") from exc


def folder_writable(path: Path) -> bool:
    return os.access(path.resolve().parent, os.W_OK | os.X_OK)


def not_writable(path: Path) -> str:
    """Why the project at `path` cannot be saved here ('' when it can): the file or its folder
    is read-only (SQLite writes its journal and the lock beside the file)."""
    if not os.access(path, os.W_OK):
        return "the file is read-only"
    if not folder_writable(path):
        return "its folder is read-only"
    return ""


def readonly_connection(path: Path) -> sqlite3.Connection:
    """A connection that never writes. In a read-only folder SQLite cannot make the shared-
    memory file a WAL reader needs, so the file is read as immutable; changes still waiting in
    a `-wal` file there cannot be read, and opening is refused rather than showing old text."""
    uri = path.resolve().as_uri() + "?mode=ro"
    if not folder_writable(path):  # immutable skips a -wal, and a -journal's rollback
        for side in (Path(f"{path}-wal"), diskfaults.journal_of(path)):
            if side.exists() and side.stat().st_size > 0:
                raise ProjectError(
                    f"{path.name} has recent changes in {side.name} and its folder is read-only, "
                    "so they cannot be read: copy the folder somewhere writable and open it there"
                )
        uri += "&immutable=1"
    return sqlite3.connect(uri, uri=True, check_same_thread=False)


@contextlib.contextmanager
def _refused_leaves_no_side_files(path: Path):
    """When a look at `path` refuses it, remove the `-wal`/`-shm` files the look created: a
    refused file is left exactly as it was found (files already there are never touched)."""
    side = [Path(f"{path}{suffix}") for suffix in ("-wal", "-shm")]
    existed = {p for p in side if p.exists()}
    try:
        yield
    except ProjectError:
        for p in side:
            if p not in existed:
                with contextlib.suppress(OSError):
                    p.unlink()
        raise


def inspect_file(path: Path) -> int:
    """Check a file through a read-only connection; returns its format version.

    Raises ProjectError, never writes: a refused file stays exactly as it was."""
    header = read_header(path)
    if not header:
        raise ProjectError(f"{path.name} is empty, not a SwiftWriter project")
    if not header.startswith(SQLITE_MAGIC):
        raise ProjectError(f"{path.name} is not a SwiftWriter project (not an SQLite database)")
    with _refused_leaves_no_side_files(path):
        return _inspect(path)


def _inspect(path: Path) -> int:
    try:
        conn = readonly_connection(path)
    except sqlite3.Error as exc:
        raise ProjectError(f"Cannot open {path.name}: {exc}") from exc
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if app_id != schema.APPLICATION_ID:
            raise ProjectError(
                f"{path.name} is an SQLite database but not a SwiftWriter project; "
                "it was left untouched"
            )
        if version > schema.SCHEMA_VERSION:
            raise ProjectError(
                f"{path.name} was saved by a newer SwiftWriter (format {version}, this one "
                f"reads up to {schema.SCHEMA_VERSION}): update SwiftWriter to open it"
            )
        have = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        missing = sorted(schema.expected_tables(version) - have)
        if missing:
            raise ProjectError(
                f"{path.name} is damaged (its {', '.join(missing)} table is missing); it was "
                "left untouched: open a backup copy instead"
            )
        problems = [row[0] for row in conn.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            raise ProjectError(
                f"{path.name} is damaged ({problems[0]}); it was left untouched: "
                "open a backup copy instead"
            )
        return version
    except sqlite3.DatabaseError as exc:
        raise ProjectError(
            diskfaults.explain(exc, path, "Could not read")
            or f"{path.name} is damaged or not a database ({exc}); it was left untouched"
        ) from exc
    finally:
        conn.close()

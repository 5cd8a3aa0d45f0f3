"""A project: one SQLite file (through sqlite-utils) holding a writer's documents, snapshots,
notes and generation history.

Safety first: a file is checked through a read-only connection before anything writes to it,
so a damaged, foreign or newer file is refused and left byte-for-byte as it was; one writer at
a time (see `lock`); WAL with full sync; every write is one transaction; an old format is backed
up, then migrated in one transaction."""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import sqlite_utils

from swiftwriter import __version__
from swiftwriter.store import schema
from swiftwriter.store.generations import GenerationsMixin
from swiftwriter.store.lock import ProjectLock, holder_if_locked
from swiftwriter.store.records import (
    DOCUMENT_KINDS,
    Document,
    Note,
    ProjectError,
    ProjectLockedError,
    Snapshot,
    check_id,
    check_text,
    check_title,
    now,
)

SQLITE_MAGIC = b"SQLite format 3\x00"
SUFFIX = ".swiftwriter"


def _locked(method):
    """Serialise access: the app streams from a worker thread while the window reads."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._mutex:
            if self.db is None:
                raise ProjectError(f"The project {self.path.name} is closed")
            return method(self, *args, **kwargs)

    return wrapper


def _read_header(path: Path) -> bytes:
    if not path.exists():
        raise ProjectError(f"No such project: {path}")
    if not path.is_file():
        raise ProjectError(f"{path} is not a file")
    try:
        with open(path, "rb") as fh:
            return fh.read(100)
    except OSError as exc:
        raise ProjectError(f"Cannot read {path}: {exc.strerror or exc}") from exc


def _readonly_connection(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, check_same_thread=False)


def inspect_file(path: Path) -> int:
    """Check a file through a read-only connection; returns its format version.

    Raises ProjectError, never writes: a refused file stays exactly as it was."""
    header = _read_header(path)
    if not header:
        raise ProjectError(f"{path.name} is empty, not a SwiftWriter project")
    if not header.startswith(SQLITE_MAGIC):
        raise ProjectError(f"{path.name} is not a SwiftWriter project (not an SQLite database)")
    try:
        conn = _readonly_connection(path)
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
        problems = [row[0] for row in conn.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            raise ProjectError(
                f"{path.name} is damaged ({problems[0]}); it was left untouched: "
                "open a backup copy instead"
            )
        return version
    except sqlite3.DatabaseError as exc:
        raise ProjectError(
            f"{path.name} is damaged or not a database ({exc}); it was left untouched"
        ) from exc
    finally:
        conn.close()


class Project(GenerationsMixin):
    """An open project. Use `Project.create` or `Project.open`, and `close()` (or `with`)."""

    def __init__(
        self,
        path: Path,
        db: sqlite_utils.Database,
        readonly: bool,
        lock: ProjectLock | None = None,
        readonly_reason: str = "",
    ):
        self.path = path
        self.db: sqlite_utils.Database | None = db
        self._readonly = readonly
        self.readonly_reason = readonly_reason
        self._lock = lock
        self._mutex = threading.RLock()
        self._live: dict[int, object] = {}  # generation id -> GenerationRecord streaming now

    # -- opening and closing ----------------------------------------------------------------
    @classmethod
    def create(cls, path, title: str = "", author: str = "") -> Project:
        """Make a new project file (refused if the path exists) and open it for writing."""
        path = Path(path).expanduser()
        title, author = check_text(title, "title").strip(), check_text(author, "author").strip()
        if path.exists():
            raise ProjectError(f"{path} already exists: open it, or choose another name")
        if not path.parent.is_dir():
            raise ProjectError(f"No such folder: {path.parent}")
        tmp = path.with_name(f".{path.name}.{os.getpid()}.creating")
        try:
            db = sqlite_utils.Database(sqlite3.connect(tmp), execute_plugins=False)
            db.enable_wal()
            schema.migrate(db)
            created = now()
            with db.atomic():
                db["meta"].insert_all(
                    [
                        {"key": k, "value": v}
                        for k, v in (
                            ("title", title),
                            ("author", author),
                            ("created", created),
                            ("creator", f"SwiftWriter {__version__}"),
                        )
                    ]
                )
            db.close()  # checkpoints the WAL: the file is complete before it gets its name
            try:
                os.link(tmp, path)  # fails if the name was taken meanwhile, never overwrites
            except FileExistsError as exc:
                raise ProjectError(
                    f"{path} already exists: open it, or choose another name"
                ) from exc
            except OSError:
                if path.exists():
                    raise ProjectError(f"{path} already exists") from None
                os.replace(tmp, path)
        except (OSError, sqlite3.Error) as exc:
            raise ProjectError(f"Could not create {path}: {exc}") from exc
        finally:
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                with contextlib.suppress(OSError):
                    leftover.unlink()
        return cls.open(path)

    @classmethod
    def open(cls, path, readonly: bool = False, fallback_readonly: bool = False) -> Project:
        """Open for writing (one writer at a time) or read-only (never writes the file).

        If another instance holds the project, raise ProjectLockedError, or with
        `fallback_readonly` open it read-only and say why in `readonly_reason`."""
        path = Path(path).expanduser()
        if readonly:
            return cls._open_readonly(path, "opened read-only")
        _read_header(path)
        lock = ProjectLock(path)
        try:
            holder = lock.acquire()
        except OSError as exc:
            raise ProjectError(
                f"Cannot lock {path.name} ({exc.strerror or exc}): open it read-only"
            ) from exc
        if holder is not None:
            message = f"{path.name} is open in another SwiftWriter ({holder.describe()})"
            if fallback_readonly:
                return cls._open_readonly(path, message + ": opened read-only")
            raise ProjectLockedError(message + "; open it read-only or close it there", holder)
        try:
            version = inspect_file(path)
            if version < schema.SCHEMA_VERSION:
                cls._backup(path, version)
            db = sqlite_utils.Database(
                sqlite3.connect(path, check_same_thread=False), execute_plugins=False
            )
            try:
                db.execute("PRAGMA busy_timeout = 5000")
                db.enable_wal()
                db.execute("PRAGMA synchronous = FULL")
                db.execute("PRAGMA foreign_keys = ON")
                schema.migrate(db)
            except sqlite3.Error as exc:
                db.close()
                raise ProjectError(f"Could not open {path.name} for writing: {exc}") from exc
        except BaseException:
            lock.release()
            raise
        return cls(path, db, readonly=False, lock=lock)

    @classmethod
    def _open_readonly(cls, path: Path, reason: str) -> Project:
        version = inspect_file(path)
        conn = _readonly_connection(path)
        if version < schema.SCHEMA_VERSION:  # read an older format through a migrated copy
            memory = sqlite3.connect(":memory:", check_same_thread=False)
            conn.backup(memory)
            conn.close()
            conn = memory
            schema.migrate(sqlite_utils.Database(conn, execute_plugins=False))
        db = sqlite_utils.Database(conn, execute_plugins=False)
        return cls(path, db, readonly=True, readonly_reason=reason)

    @staticmethod
    def _backup(path: Path, version: int) -> None:
        """Before a migration, keep a copy of the file in its old format (once)."""
        target = path.with_name(f"{path.name}.format{version}.bak")
        if target.exists():
            return
        source = _readonly_connection(path)
        try:
            dest = sqlite3.connect(target)
            try:
                source.backup(dest)
            finally:
                dest.close()
        except sqlite3.Error as exc:
            raise ProjectError(f"Could not back up {path.name} before upgrading it: {exc}") from exc
        finally:
            source.close()

    def close(self) -> None:
        with self._mutex:
            for record in list(self._live.values()):
                with contextlib.suppress(ProjectError):
                    record.flush()
            if self.db is not None:
                self.db.close()
                self.db = None
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def __enter__(self) -> Project:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - best effort for a forgotten close()
        with contextlib.suppress(Exception):
            self.close()

    # -- transactions -----------------------------------------------------------------------
    @property
    def readonly(self) -> bool:
        return self._readonly

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite_utils.Database]:
        """One transaction (a savepoint when nested); a failed write changes nothing."""
        with self._mutex:
            if self.db is None:
                raise ProjectError(f"The project {self.path.name} is closed")
            if self._readonly:
                raise ProjectError(f"{self.path.name} is read-only here ({self.readonly_reason})")
            try:
                with self.db.atomic():
                    yield self.db
            except sqlite3.Error as exc:
                raise ProjectError(
                    f"Could not save to {self.path.name} ({exc}); this change was not made"
                ) from exc

    def batch(self):
        """Group several changes into one transaction: all of them are saved, or none."""
        return self._write()

    @_locked
    def integrity_check(self) -> str:
        rows = self.db.execute("PRAGMA integrity_check").fetchall()
        return "; ".join(r[0] for r in rows)

    @_locked
    def schema_version(self) -> int:
        return schema.version_of(self.db)

    def writer_elsewhere(self) -> bool:
        """True when this is a read-only view and another instance holds the write lock."""
        return self._readonly and holder_if_locked(self.path) is not None

    # -- metadata ---------------------------------------------------------------------------
    @property
    @_locked
    def meta(self) -> dict:
        return {r["key"]: r["value"] for r in self.db.query("SELECT key, value FROM meta")}

    def update_meta(self, **values: str) -> None:
        rows = [{"key": k, "value": check_text(v, k)} for k, v in values.items()]
        with self._write() as db:
            db["meta"].upsert_all(rows, pk="key")

    # -- documents --------------------------------------------------------------------------
    _DOC_COLUMNS = "id, parent_id, kind, title, text, position, created, modified"

    @_locked
    def documents(self) -> list[Document]:
        """All documents outside the trash, in depth-first tree order."""
        rows = list(
            self.db.query(f"SELECT {self._DOC_COLUMNS} FROM documents WHERE deleted IS NULL")
        )
        children = defaultdict(list)
        ids = {r["id"] for r in rows}
        for r in rows:
            parent = r["parent_id"] if r["parent_id"] in ids else None
            children[parent].append(r)
        out: list[Document] = []
        seen: set[int] = set()

        def walk(parent, depth):
            for r in sorted(children.get(parent, ()), key=lambda r: (r["position"], r["id"])):
                if r["id"] in seen:
                    continue
                seen.add(r["id"])
                out.append(self._doc(r, depth))
                walk(r["id"], depth + 1)

        walk(None, 0)
        return out

    @_locked
    def document(self, doc_id: int) -> Document:
        row = self._doc_row(doc_id)
        depth, parent, hops = 0, row["parent_id"], 0
        while parent is not None and hops < 10_000:
            up = self.db.execute(
                "SELECT parent_id FROM documents WHERE id = ?", [parent]
            ).fetchone()
            if up is None:
                break
            depth, parent, hops = depth + 1, up[0], hops + 1
        return self._doc(row, depth)

    def add_document(
        self,
        title: str,
        text: str = "",
        parent_id: int | None = None,
        kind: str = "chapter",
        position: int | None = None,
    ) -> Document:
        title, text = check_title(title), check_text(text, "document text")
        if kind not in DOCUMENT_KINDS:
            raise ProjectError(f"Unknown document kind '{kind}' (use {', '.join(DOCUMENT_KINDS)})")
        with self._write() as db:
            if parent_id is not None:
                self._doc_row(parent_id)
            siblings = self._sibling_ids(parent_id)
            position = self._check_position(position, len(siblings))
            stamp = now()
            new_id = (
                db["documents"]
                .insert(
                    {
                        "parent_id": parent_id,
                        "kind": kind,
                        "title": title,
                        "text": text,
                        "position": position,
                        "created": stamp,
                        "modified": stamp,
                    }
                )
                .last_pk
            )
            siblings.insert(position, new_id)
            self._renumber(siblings)
        return self.document(new_id)

    def update_text(self, doc_id: int, text: str) -> None:
        check_text(text, "document text")
        with self._write() as db:
            self._doc_row(doc_id)
            db.execute(
                "UPDATE documents SET text = ?, modified = ? WHERE id = ?", [text, now(), doc_id]
            )

    def rename(self, doc_id: int, title: str) -> None:
        title = check_title(title)
        with self._write() as db:
            self._doc_row(doc_id)
            db.execute(
                "UPDATE documents SET title = ?, modified = ? WHERE id = ?", [title, now(), doc_id]
            )

    def move(self, doc_id: int, parent_id: int | None, position: int | None = None) -> None:
        """Put a document (with everything below it) under `parent_id` at `position`."""
        with self._write() as db:
            row = self._doc_row(doc_id)
            if parent_id is not None:
                self._doc_row(parent_id)
                if parent_id == doc_id or parent_id in self._descendants(doc_id):
                    raise ProjectError("A document cannot be moved inside itself")
            old = [i for i in self._sibling_ids(row["parent_id"]) if i != doc_id]
            new = old if parent_id == row["parent_id"] else self._sibling_ids(parent_id)
            position = self._check_position(position, len(new))
            db.execute("UPDATE documents SET parent_id = ? WHERE id = ?", [parent_id, doc_id])
            new.insert(position, doc_id)
            self._renumber(new)
            if parent_id != row["parent_id"]:
                self._renumber(old)

    def delete(self, doc_id: int) -> None:
        """Move a document and everything below it to the trash (nothing is erased)."""
        with self._write() as db:
            row = self._doc_row(doc_id)
            stamp = now()
            for i in [doc_id, *self._descendants(doc_id)]:
                db.execute("UPDATE documents SET deleted = ? WHERE id = ?", [stamp, i])
            self._renumber(self._sibling_ids(row["parent_id"]))

    @_locked
    def trash(self) -> list[Document]:
        """Documents deleted as a whole (their children come back with them)."""
        rows = self.db.query(
            f"SELECT {self._DOC_COLUMNS} FROM documents d WHERE deleted IS NOT NULL AND NOT "
            "EXISTS (SELECT 1 FROM documents p WHERE p.id = d.parent_id AND p.deleted = d.deleted)"
            " ORDER BY deleted DESC, id"
        )
        return [self._doc(r, 0) for r in rows]

    def undelete(self, doc_id: int) -> Document:
        with self._write() as db:
            row = self._doc_row(doc_id, deleted=True)
            stamp = db.execute("SELECT deleted FROM documents WHERE id = ?", [doc_id]).fetchone()[0]
            if stamp is None:
                raise ProjectError(f"Document {doc_id} is not in the trash")
            parent = row["parent_id"]
            if parent is not None and not self._exists(parent):
                parent = None
            for i in [doc_id, *self._descendants(doc_id, deleted=stamp)]:
                db.execute("UPDATE documents SET deleted = NULL WHERE id = ?", [i])
            siblings = [i for i in self._sibling_ids(parent) if i != doc_id] + [doc_id]
            db.execute("UPDATE documents SET parent_id = ? WHERE id = ?", [parent, doc_id])
            self._renumber(siblings)
        return self.document(doc_id)

    # -- snapshots --------------------------------------------------------------------------
    def snapshot(self, doc_id: int, reason: str = "manual") -> int:
        """Keep the document's current version; an unchanged document reuses its last one."""
        reason = check_text(reason, "snapshot reason")[:200]
        with self._write() as db:
            row = self._doc_row(doc_id)
            last = db.execute(
                "SELECT id, title, text FROM snapshots WHERE doc_id = ? ORDER BY id DESC LIMIT 1",
                [doc_id],
            ).fetchone()
            if last is not None and last[1] == row["title"] and last[2] == row["text"]:
                return last[0]
            return (
                db["snapshots"]
                .insert(
                    {
                        "doc_id": doc_id,
                        "title": row["title"],
                        "text": row["text"],
                        "reason": reason,
                        "created": now(),
                    }
                )
                .last_pk
            )

    @_locked
    def snapshots(self, doc_id: int) -> list[Snapshot]:
        """Versions of a document, newest first."""
        check_id(doc_id)
        rows = self.db.query(
            "SELECT id, doc_id, title, text, reason, created FROM snapshots WHERE doc_id = ? "
            "ORDER BY id DESC",
            [doc_id],
        )
        return [Snapshot(**r) for r in rows]

    def restore_snapshot(self, snapshot_id: int) -> Document:
        """Put a snapshot's text back; the text it replaces is kept as a snapshot first."""
        check_id(snapshot_id, "snapshot")
        with self._write() as db:
            row = db.execute(
                "SELECT doc_id, text FROM snapshots WHERE id = ?", [snapshot_id]
            ).fetchone()
            if row is None:
                raise ProjectError(f"No snapshot with id {snapshot_id} in this project")
            doc_id, text = row
            self.snapshot(doc_id, reason=f"before restoring snapshot {snapshot_id}")
            db.execute(
                "UPDATE documents SET text = ?, modified = ? WHERE id = ?", [text, now(), doc_id]
            )
        return self.document(doc_id)

    # -- notes ------------------------------------------------------------------------------
    _NOTE_COLUMNS = "id, title, text, pinned, position, created, modified"

    @_locked
    def notes(self) -> list[Note]:
        rows = self.db.query(f"SELECT {self._NOTE_COLUMNS} FROM notes ORDER BY position, id")
        return [self._note(r) for r in rows]

    def pinned_notes(self) -> list[Note]:
        """Notes that go into every prompt (story bible, outline, style)."""
        return [n for n in self.notes() if n.pinned]

    @_locked
    def note(self, note_id: int) -> Note:
        check_id(note_id, "note")
        row = next(
            self.db.query(f"SELECT {self._NOTE_COLUMNS} FROM notes WHERE id = ?", [note_id]), None
        )
        if row is None:
            raise ProjectError(f"No note with id {note_id} in this project")
        return self._note(row)

    def add_note(self, title: str, text: str = "", pinned: bool = False) -> Note:
        title, text = check_title(title, "note"), check_text(text, "note text")
        with self._write() as db:
            position = db.execute("SELECT COALESCE(MAX(position) + 1, 0) FROM notes").fetchone()[0]
            stamp = now()
            note_id = (
                db["notes"]
                .insert(
                    {
                        "title": title,
                        "text": text,
                        "pinned": int(bool(pinned)),
                        "position": position,
                        "created": stamp,
                        "modified": stamp,
                    }
                )
                .last_pk
            )
        return self.note(note_id)

    def update_note(
        self,
        note_id: int,
        title: str | None = None,
        text: str | None = None,
        pinned: bool | None = None,
    ) -> Note:
        changes: dict = {"modified": now()}
        if title is not None:
            changes["title"] = check_title(title, "note")
        if text is not None:
            changes["text"] = check_text(text, "note text")
        if pinned is not None:
            changes["pinned"] = int(bool(pinned))
        with self._write() as db:
            self.note(note_id)
            db["notes"].update(note_id, changes)
        return self.note(note_id)

    def delete_note(self, note_id: int) -> None:
        with self._write() as db:
            self.note(note_id)
            db.execute("DELETE FROM notes WHERE id = ?", [note_id])

    # -- pieces -----------------------------------------------------------------------------
    @staticmethod
    def _doc(row: dict, depth: int) -> Document:
        return Document(
            id=row["id"],
            parent_id=row["parent_id"],
            kind=row["kind"],
            title=row["title"],
            text=row["text"],
            position=row["position"],
            depth=depth,
            created=row["created"] or "",
            modified=row["modified"] or "",
        )

    @staticmethod
    def _note(row: dict) -> Note:
        return Note(**{**row, "pinned": bool(row["pinned"]), "created": row["created"] or ""})

    def _doc_row(self, doc_id, deleted: bool = False) -> dict:
        check_id(doc_id)
        row = next(
            self.db.query(
                f"SELECT {self._DOC_COLUMNS}, deleted FROM documents WHERE id = ?", [doc_id]
            ),
            None,
        )
        if row is None or (row.pop("deleted") is not None and not deleted):
            raise ProjectError(f"No document with id {doc_id} in this project")
        return row

    def _exists(self, doc_id: int) -> bool:
        return bool(
            self.db.execute(
                "SELECT 1 FROM documents WHERE id = ? AND deleted IS NULL", [doc_id]
            ).fetchone()
        )

    def _sibling_ids(self, parent_id: int | None) -> list[int]:
        rows = self.db.execute(
            "SELECT id FROM documents WHERE parent_id IS ? AND deleted IS NULL "
            "ORDER BY position, id",
            [parent_id],
        )
        return [r[0] for r in rows]

    def _descendants(self, doc_id: int, deleted: str | None = None) -> list[int]:
        """Ids below a document: live ones, or those trashed at the `deleted` time stamp."""
        rows = self.db.execute(
            "WITH RECURSIVE below(id) AS (SELECT id FROM documents WHERE parent_id = ? "
            "UNION SELECT d.id FROM documents d JOIN below b ON d.parent_id = b.id) "
            "SELECT d.id FROM below b JOIN documents d ON d.id = b.id WHERE d.deleted IS ?",
            [doc_id, deleted],
        )
        return [r[0] for r in rows]

    def _renumber(self, ids: list[int]) -> None:
        for position, i in enumerate(ids):
            self.db.execute(
                "UPDATE documents SET position = ? WHERE id = ? AND position IS NOT ?",
                [position, i, position],
            )

    @staticmethod
    def _check_position(position, count: int) -> int:
        if position is None:
            return count
        if isinstance(position, bool) or not isinstance(position, int):
            raise ProjectError(f"A position must be a whole number, not {position!r}")
        if not 0 <= position <= count:
            raise ProjectError(f"Position {position} is out of range: use 0 to {count}")
        return position

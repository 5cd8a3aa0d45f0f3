"""A project: one SQLite file (through sqlite-utils) holding a writer's documents, snapshots,
notes, lorebook and generation history.

Safety first: a file is checked through a read-only connection before anything writes to it,
so a damaged, foreign or newer file is refused and left byte-for-byte as it was; one writer at
a time (see `lock`); WAL with full sync; every write is one transaction; an old format is backed
up, then migrated in one transaction."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import sqlite_utils

from swiftwriter import __version__
from swiftwriter.store import backups, diskfaults, schema
from swiftwriter.store.documents import DocumentsMixin, _locked
from swiftwriter.store.excerpts import ExcerptsMixin
from swiftwriter.store.history import HistoryMixin
from swiftwriter.store.inspection import (
    inspect_file,
    not_writable,
    read_header,
    readonly_connection,
)
from swiftwriter.store.lock import ProjectLock, holder_if_locked
from swiftwriter.store.lore import LoreMixin
from swiftwriter.store.records import (
    ProjectError,
    ProjectLockedError,
    check_text,
    now,
)
from swiftwriter.store.summaries import SummariesMixin
from swiftwriter.store.take_records import GenerationsMixin
from swiftwriter.store.texts import as_text

SUFFIX = ".swiftwriter"
log = logging.getLogger(__name__)


def _could_not_open(exc: BaseException, path: Path, otherwise: str) -> ProjectError:
    """What a failed open says: the disk's own fault where it is one (full, read-only, ...),
    else `otherwise`."""
    return ProjectError(diskfaults.explain(exc, path, "Could not open") or otherwise)


class Project(
    DocumentsMixin, ExcerptsMixin, GenerationsMixin, HistoryMixin, LoreMixin, SummariesMixin
):
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
        self._depth = 0  # nested _write blocks: the outermost one checkpoints
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
        tmp = None
        try:
            # a fresh name made with O_EXCL: never a file or link someone left in the way
            fd, name = tempfile.mkstemp(
                prefix=f".{path.name}.", suffix=".creating", dir=path.parent
            )
            os.close(fd)
            tmp = Path(name)
            cls._fill_new(tmp, title, author)
            cls._link_into_place(tmp, path)
        except (OSError, sqlite3.Error) as exc:
            raise ProjectError(f"Could not create {path}: {exc}") from exc
        finally:
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")) if tmp else ():
                with contextlib.suppress(OSError):
                    leftover.unlink()
        log.debug("created %s", path)
        return cls.open(path)

    @staticmethod
    def _fill_new(tmp: Path, title: str, author: str) -> None:
        """A new file's schema and meta (title, author, when and by what it was made)."""
        db = sqlite_utils.Database(sqlite3.connect(tmp), execute_plugins=False)
        try:
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
        finally:
            db.close()  # checkpoints the WAL: the file is complete before it gets its name

    @staticmethod
    def _link_into_place(tmp: Path, path: Path) -> None:
        """The finished file under its name, which must still be free."""
        try:
            os.link(tmp, path)  # fails if the name was taken meanwhile, never overwrites
        except FileExistsError as exc:
            raise ProjectError(f"{path} already exists: open it, or choose another name") from exc
        except OSError:
            if path.exists():
                raise ProjectError(f"{path} already exists") from None
            os.replace(tmp, path)

    @classmethod
    def open(cls, path, readonly: bool = False, fallback_readonly: bool = False) -> Project:
        """Open for writing (one writer at a time) or read-only (never writes the file).

        If another instance holds the project, raise ProjectLockedError, or with
        `fallback_readonly` open it read-only and say why in `readonly_reason`."""
        path = Path(path).expanduser()
        if readonly:
            return cls._open_readonly(path, "opened read-only")
        read_header(path)
        why = not_writable(path)
        if why:
            if fallback_readonly:
                return cls._open_readonly(path, f"{why}: opened read-only")
            raise ProjectError(
                f"{path.name} cannot be saved where it is ({why}): open it read-only, or copy "
                "it somewhere writable"
            )
        lock = ProjectLock(path)
        holder = cls._lock(lock, path)
        if holder is not None:
            message = f"{path.name} is open in another SwiftWriter ({holder.describe()})"
            if fallback_readonly:
                return cls._open_readonly(path, message + ": opened read-only")
            raise ProjectLockedError(message + "; open it read-only or close it there", holder)
        try:
            cls._roll_back_unfinished(path)
            version = inspect_file(path)
            if version < schema.SCHEMA_VERSION:
                cls._backup(path, version)
            db = cls._connect_for_writing(path, version)
        except BaseException:
            lock.release()
            raise
        log.debug("opened %s for writing (format %d of %d)", path, version, schema.SCHEMA_VERSION)
        return cls(path, db, readonly=False, lock=lock)

    @staticmethod
    def _lock(lock: ProjectLock, path: Path):
        """The lock taken: None, or the other SwiftWriter that holds it."""
        try:
            return lock.acquire()
        except OSError as exc:
            why = f"Cannot lock {path.name} ({exc.strerror or exc}): open it read-only"
            raise _could_not_open(exc, path, why) from exc

    @staticmethod
    def _roll_back_unfinished(path: Path) -> None:
        """A write killed in rollback-journal mode is undone first, as SQLite intends."""
        try:
            diskfaults.roll_back_hot_journal(path, schema.APPLICATION_ID)
        except sqlite3.Error as exc:
            why = f"Could not roll back the unfinished change in {path.name}: {exc}"
            raise _could_not_open(exc, path, why) from exc

    @staticmethod
    def _connect_for_writing(path: Path, version: int) -> sqlite_utils.Database:
        """The file opened for saves: durable writes, foreign keys, planted triggers removed,
        the schema migrated, then write-ahead logging."""
        db = sqlite_utils.Database(
            sqlite3.connect(path, check_same_thread=False), execute_plugins=False
        )
        try:
            db.execute("PRAGMA busy_timeout = 5000")
            db.execute("PRAGMA synchronous = FULL")
            db.execute("PRAGMA foreign_keys = ON")
            schema.remove_planted(db, version, path.name)  # a trigger must not run on saves
            schema.migrate(db)  # first: a migration that fails leaves every byte as it was
            db.enable_wal()
        except sqlite3.Error as exc:
            db.close()
            why = f"Could not open {path.name} for writing: {exc}"
            raise _could_not_open(exc, path, why) from exc
        return db

    @classmethod
    def _open_readonly(cls, path: Path, reason: str) -> Project:
        version = inspect_file(path)
        conn = readonly_connection(path)
        if version < schema.SCHEMA_VERSION:  # read an older format through a migrated copy
            memory = sqlite3.connect(":memory:", check_same_thread=False)
            conn.backup(memory)
            conn.close()
            conn = memory
            schema.migrate(sqlite_utils.Database(conn, execute_plugins=False))
        db = sqlite_utils.Database(conn, execute_plugins=False)
        log.debug("opened %s read-only (format %d): %s", path, version, reason)
        return cls(path, db, readonly=True, readonly_reason=reason)

    @staticmethod
    def _backup(path: Path, version: int) -> None:
        """Before a migration, keep a sound copy of the file in its old format (see backups)."""
        backups.before_migration(path, version)

    def close(self) -> None:
        with self._mutex:
            for record in list(self._live.values()):
                with contextlib.suppress(ProjectError):
                    record.flush()
            if self.db is not None:
                self.db.close()
                self.db = None
                log.debug("closed %s", self.path)
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
            self._depth += 1
            try:
                with self.db.atomic():
                    yield self.db
            except sqlite3.Error as exc:
                if diskfaults.is_disk_full(exc, self.path):
                    why = "this change was not made: free some space and save again"
                    message = diskfaults.full_message(self.path, "Could not save to", why)
                    raise ProjectError(message) from exc
                raise ProjectError(
                    f"Could not save to {self.path.name} ({exc}); this change was not made"
                ) from exc
            finally:
                self._depth -= 1
            if self._depth == 0:
                self._checkpoint()

    def _checkpoint(self) -> None:
        """Copy committed pages from the `-wal` file into the project file, so the file alone
        holds every committed change (writers copy and sync single files). Passive: a reader
        elsewhere only postpones it to the next write; the change is safe in the WAL anyway."""
        with contextlib.suppress(sqlite3.Error):
            self.db.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def batch(self):
        """Group several changes into one transaction: all of them are saved, or none."""
        return self._write()

    @_locked
    def backup(self):
        """A consistent copy into the data folder's backups (store/backups.py); returns it."""
        return backups.make_backup(self.db.conn, self.path)

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

    @_locked
    def meta_value(self, key: str) -> str:
        """One metadata value ("" when not set), read alone: the memory may be long."""
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return "" if row is None else as_text(row[0], lambda: f"{self.path.name}: {key}")

    @property
    def memory(self) -> str:
        """What this book is (premise, style, characters): the first part of every prompt."""
        return self.meta_value("memory")

    def set_memory(self, text: str) -> None:
        self.update_meta(memory=text)

    @property
    def stop_sequences(self) -> list[str]:
        """The project's stop sequences (one per line in the metadata): a take ends once it
        writes one (a `re:` line is a regular expression)."""
        return [line for line in self.meta_value("stop_sequences").split("\n") if line]

    def set_stop_sequences(self, stops) -> None:
        lines = [check_text(s, "stop sequence") for s in stops]
        if any("\n" in s for s in lines):
            raise ProjectError("A stop sequence is one line of text")
        self.update_meta(stop_sequences="\n".join(s for s in lines if s))

    def update_meta(self, **values: str) -> None:
        rows = [{"key": k, "value": check_text(v, k)} for k, v in values.items()]
        with self._write() as db:
            db["meta"].upsert_all(rows, pk="key")

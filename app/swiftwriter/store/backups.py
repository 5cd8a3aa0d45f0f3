"""Rolling backups of a project, kept outside the live file: a disk error, a bad sync or a
mistaken delete can take the project file, so consistent copies live in the data folder.

A backup is made with SQLite's online backup API (a consistent copy even while the project is
open and being written), first under a temporary name, then renamed into place. Each project
has its own folder of backups, named by the project's file name and a hash of its full path;
the newest few are kept, and older ones thinned to one per day for the last month that has
backups (counted by days with backups, never by age: a clock set wrong deletes nothing). Each
backup's SHA-256 is recorded beside it when made and checked before it is restored. A backup is
restored as a new project, never over the live file; temporaries get fresh names (a planted
link is never followed) and are locked while in use, so those of a killed run are cleared."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

from swiftwriter import atomic, paths
from swiftwriter.store import schema
from swiftwriter.store.inspection import inspect_file, readonly_connection
from swiftwriter.store.records import ProjectError

log = logging.getLogger(__name__)

KEEP_RECENT = 10  # the newest backups are all kept
KEEP_DAYS = 30  # older ones: the newest of each day, for this many days
STAMP = "%Y%m%d-%H%M%S"
SUFFIX = ".swiftwriter"
SOURCE = "source.json"  # which project a backup folder belongs to
CHECKSUM = ".sha256"  # beside each backup: its SHA-256, recorded when it was made
AHEAD = timedelta(hours=1)  # a backup dated further after the clock is suspect
STALE_S = 600  # without file locks: a temporary untouched this long belongs to a killed run


@dataclass(frozen=True)
class Backup:
    path: Path
    made: datetime
    size: int

    def describe(self) -> str:
        """One line for a listing, with the checksum checked (the path last)."""
        mark = {True: "checksum ok", False: "DAMAGED", None: "no checksum"}[verify(self.path)]
        return f"{self.made:%Y-%m-%d %H:%M:%S}  {self.size / 1024:,.0f} KB  {mark}  {self.path}"


def backups_root() -> Path:
    return paths.data_dir() / "backups"


def folder_for(project: Path) -> Path:
    """Where backups of the project at this path go (created on demand)."""
    project = Path(project).expanduser().resolve()
    digest = hashlib.sha256(str(project).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return backups_root() / f"{project.stem}-{digest}"


def make_backup(db: sqlite3.Connection, project: Path, now: float | None = None) -> Backup:
    """Copy the open project (any connection to it) into its backup folder, then thin the
    folder. Never touches the project file."""
    project = Path(project).expanduser().resolve()
    folder = folder_for(project)
    made = datetime.fromtimestamp(time.time() if now is None else now)
    target = folder / f"{made.strftime(STAMP)}{SUFFIX}"
    tmp = held = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / SOURCE).write_text(json.dumps({"project": str(project)}), encoding="utf-8")
        clear_stale(folder, ".*.partial")
        tmp, held = _temporary(folder, f".{target.name}.", ".partial")
        dest = sqlite3.connect(tmp)
        try:
            db.backup(dest)
            _drop_planted(dest)
            dest.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
        finally:
            dest.close()
        _sync(tmp)
        atomic.replace_text(Path(f"{target}{CHECKSUM}"), f"{_sha256(tmp)}  {target.name}\n")
        os.replace(tmp, target)
    except (OSError, sqlite3.Error) as exc:
        with contextlib.suppress(OSError, TypeError):
            tmp.unlink()
        raise ProjectError(f"Could not back up {project.name}: {exc}") from exc
    finally:
        if held is not None:
            os.close(held)
    gone = thin(folder, datetime.fromtimestamp(time.time()))  # the clock now, not the name's
    size = target.stat().st_size
    log.debug(
        "backed up %s to %s (%d bytes; %d old ones thinned)", project, target, size, len(gone)
    )
    return Backup(target, made, size)


def list_backups(project: Path) -> list[Backup]:
    """The project's backups, newest first."""
    folder = folder_for(project)
    if not folder.is_dir():
        return []
    clear_stale(folder, ".*.partial")  # left by a backup killed midway
    return sorted(_in_folder(folder), key=lambda b: b.made, reverse=True)


def verify(backup: Path) -> bool | None:
    """Whether the backup still has the SHA-256 recorded when it was made (None: none was)."""
    try:
        recorded = Path(f"{backup}{CHECKSUM}").read_text(encoding="utf-8").split()[0]
    except (OSError, UnicodeDecodeError, IndexError):
        return None
    try:
        return _sha256(Path(backup)) == recorded
    except OSError:
        return False


def thin(folder: Path, now: datetime) -> list[Path]:
    """Keep the newest KEEP_RECENT backups and, beyond them, the newest of each of the
    KEEP_DAYS latest days that have backups; remove the rest. Counting days with backups
    instead of age means a clock set a year fast deletes nothing. A backup dated after `now`
    (the clock) is suspect: kept, but it never holds a place among the recent or the days
    (only the newest KEEP_RECENT of those are kept). Returns what was removed."""
    backups = sorted(_in_folder(folder), key=lambda b: b.made, reverse=True)
    future = [b for b in backups if b.made > now + AHEAD]
    sane = [b for b in backups if b.made <= now + AHEAD]
    days: list = []
    drop = future[KEEP_RECENT:]
    for index, backup in enumerate(sane):
        day = backup.made.date()
        new_day = day not in days
        if new_day:
            days.append(day)
        if not (index < KEEP_RECENT or (new_day and len(days) <= KEEP_DAYS)):
            drop.append(backup)
    removed = []
    for backup in drop:
        with contextlib.suppress(OSError):
            backup.path.unlink()
            removed.append(backup.path)
            Path(f"{backup.path}{CHECKSUM}").unlink(missing_ok=True)
    return removed


def _in_folder(folder: Path) -> list[Backup]:
    """The backups in a folder, by their names (other files are not backups)."""
    out = []
    for path in folder.glob(f"*{SUFFIX}"):
        try:
            made = datetime.strptime(path.name[: -len(SUFFIX)], STAMP)
        except ValueError:
            continue
        out.append(Backup(path, made, path.stat().st_size))
    return out


def restore(backup: Path, new: Path) -> Path:
    """Make a new project file from a backup (checked first; never over an existing file)."""
    backup, new = Path(backup).expanduser(), Path(new).expanduser()
    if verify(backup) is False:
        raise ProjectError(
            f"{backup.name} is damaged (its checksum differs from the one recorded when it was "
            "made); it was not restored: choose another backup"
        )
    inspect_file(backup)
    if new.exists() or new.is_symlink():
        raise ProjectError(f"{new} already exists: restore to a new name")
    if not new.parent.is_dir():
        raise ProjectError(f"No such folder: {new.parent}")
    tmp = held = None
    try:
        clear_stale(new.parent, ".*.restoring")  # left by a restore killed midway
        tmp, held = _temporary(new.parent, f".{new.name}.", ".restoring")
        source = sqlite3.connect(backup.resolve().as_uri() + "?mode=ro", uri=True)
        dest = sqlite3.connect(tmp)
        try:
            source.backup(dest)
            _drop_planted(dest)
            dest.execute("PRAGMA journal_mode = WAL")
        finally:
            dest.close()
            source.close()
        _sync(tmp)
        _link_or_rename(tmp, new)
    except FileExistsError:
        raise ProjectError(f"{new} already exists: restore to a new name") from None
    except (OSError, sqlite3.Error) as exc:
        raise ProjectError(f"Could not restore {backup.name}: {exc}") from exc
    finally:
        if held is not None:
            os.close(held)
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")) if tmp else ():
            with contextlib.suppress(OSError):
                leftover.unlink()
    log.debug("restored %s as %s", backup, new)
    return new


def before_migration(project: Path, version: int) -> Path:
    """Keep a copy of the project in its old format beside it before a migration: written
    whole (a fresh temporary, synced, checked, then renamed), so a run killed midway leaves no
    `.bak` that looks done; one that is missing or unreadable is made again."""
    target = project.with_name(f"{project.name}.format{version}.bak")
    if sound_copy(target, version):
        return target
    tmp = held = None
    try:
        clear_stale(project.parent, f".{target.name}.*.partial")
        tmp, held = _temporary(project.parent, f".{target.name}.", ".partial")
        source = readonly_connection(project)
        try:
            dest = sqlite3.connect(tmp)
            try:
                source.backup(dest)
                dest.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
            finally:
                dest.close()
        finally:
            source.close()
        _sync(tmp)
        if not sound_copy(tmp, version):
            raise ProjectError(
                f"Could not back up {project.name} before upgrading it: the copy did not check "
                "out; the project was left as it was"
            )
        os.replace(tmp, target)
        with contextlib.suppress(OSError):  # the new name on disk too, where folders sync
            _sync(project.parent)
    except (OSError, sqlite3.Error) as exc:
        raise ProjectError(f"Could not back up {project.name} before upgrading it: {exc}") from exc
    finally:
        if held is not None:
            os.close(held)
        for leftover in (tmp, Path(f"{tmp}-journal")) if tmp else ():
            with contextlib.suppress(OSError):
                leftover.unlink()
    log.debug("kept %s in format %d as %s before upgrading it", project, version, target)
    return target


def sound_copy(copy: Path, version: int) -> bool:
    """Whether `copy` is a whole project file of format `version` (SQLite's full check)."""
    if not copy.is_file() or copy.is_symlink():
        return False
    try:
        conn = sqlite3.connect(copy.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    except sqlite3.Error:
        return False
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0] == version and conn.execute(
            "PRAGMA integrity_check"
        ).fetchall() == [("ok",)]
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def _drop_planted(copy: sqlite3.Connection) -> None:
    """A copy keeps only the SQL the app makes (a planted trigger would run on the writer's
    saves in a restored project)."""
    version = copy.execute("PRAGMA user_version").fetchone()[0]
    if 1 <= version <= schema.SCHEMA_VERSION:
        schema.drop_foreign(copy, version)


def _link_or_rename(tmp: Path, new: Path) -> None:
    """Give the finished file its name, never over a name taken meanwhile: a hard link, or
    where the file system has none (EPERM, EXDEV, ENOTSUP), the name reserved with O_EXCL and
    the file renamed onto that reservation in one step."""
    try:
        os.link(tmp, new)
        return
    except FileExistsError:
        raise
    except OSError:
        pass
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    os.close(os.open(new, flags, 0o644))
    try:
        os.replace(tmp, new)
    except OSError:
        with contextlib.suppress(OSError):
            new.unlink()
        raise


def _temporary(folder: Path, prefix: str, suffix: str) -> tuple[Path, int]:
    """A fresh file made with O_EXCL (a planted file or link is never used), held under a
    lock for as long as its descriptor is open, so `clear_stale` knows it is in use."""
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=folder)
    if fcntl is not None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return Path(name), fd


def clear_stale(folder: Path, pattern: str) -> list[Path]:
    """Remove temporaries (and their SQLite side files) that no live process holds: those a
    killed backup or restore left, which can be the size of a whole book."""
    removed = []
    for path in folder.glob(pattern):
        if _in_use(path):
            continue
        for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
            with contextlib.suppress(OSError):
                leftover.unlink()
                removed.append(leftover)
    return removed


def _in_use(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False  # a link planted there, or gone already: never ours
    try:
        if fcntl is None:  # pragma: no cover - Windows: judge by age
            return time.time() - os.fstat(fd).st_mtime < STALE_S
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        return False
    finally:
        os.close(fd)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


SYNCED_FOLDERS = ("dropbox", "onedrive", "google drive", "googledrive", "icloud", "nextcloud",
                  "owncloud", "mega", "pcloud", "box sync", "sync.com")  # fmt: skip
NETWORK_FS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "sshfs", "fuse.sshfs", "afpfs", "9p",
              "fuse.rclone", "davfs", "fuse.gvfsd-fuse"}  # fmt: skip


def location_warning(project: Path, mounts: str | None = None) -> str:
    """A sentence when the project sits in a cloud-sync folder or on a network file system,
    where two machines or a sync client can write the file under SQLite's feet; else ''."""
    project = Path(project).expanduser().resolve()
    lowered = [part.lower() for part in project.parts]
    for part in lowered:
        if any(name in part for name in SYNCED_FOLDERS):
            return (
                f"{project.name} is in a cloud-sync folder: close it on this machine before "
                "opening it on another, and keep SwiftWriter's backups"
            )
    fs = _filesystem_of(project, mounts)
    if fs in NETWORK_FS:
        return (
            f"{project.name} is on a network file system ({fs}): locking there is unreliable; "
            "work on a local copy if you can"
        )
    return ""


def _filesystem_of(path: Path, mounts: str | None) -> str:
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
    best, kind = "", ""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        if (str(path) == point or str(path).startswith(point.rstrip("/") + "/")) and len(
            point
        ) > len(best):
            best, kind = point, fields[2]
    return kind

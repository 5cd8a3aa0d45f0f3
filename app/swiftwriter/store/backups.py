"""Rolling backups of a project, kept outside the live file: a disk error, a bad sync or a
mistaken delete can take the project file, so consistent copies live in the data folder.

A backup is made with SQLite's online backup API (a consistent copy even while the project is
open and being written), first under a temporary name, then renamed into place. Each project
has its own folder of backups, named by the project's file name and a hash of its full path;
the newest few are kept, and older ones thinned to one per day for a month. A backup is
restored as a new project, never over the live file."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from swiftwriter import paths
from swiftwriter.store.records import ProjectError

KEEP_RECENT = 10  # the newest backups are all kept
KEEP_DAYS = 30  # older ones: the newest of each day, for this many days
STAMP = "%Y%m%d-%H%M%S"
SUFFIX = ".swiftwriter"
SOURCE = "source.json"  # which project a backup folder belongs to


@dataclass(frozen=True)
class Backup:
    path: Path
    made: datetime
    size: int

    def describe(self) -> str:
        return f"{self.made:%Y-%m-%d %H:%M:%S}  {self.size / 1024:,.0f} KB  {self.path}"


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
    tmp = folder / f".{target.name}.partial"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / SOURCE).write_text(json.dumps({"project": str(project)}), encoding="utf-8")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        dest = sqlite3.connect(tmp)
        try:
            db.backup(dest)
            dest.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
        finally:
            dest.close()
        os.replace(tmp, target)
    except (OSError, sqlite3.Error) as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise ProjectError(f"Could not back up {project.name}: {exc}") from exc
    thin(folder, made)
    return Backup(target, made, target.stat().st_size)


def list_backups(project: Path) -> list[Backup]:
    """The project's backups, newest first."""
    folder = folder_for(project)
    return sorted(_in_folder(folder), key=lambda b: b.made, reverse=True) if folder.is_dir() else []


def thin(folder: Path, now: datetime) -> list[Path]:
    """Keep the newest KEEP_RECENT backups and, beyond them, the newest of each day for
    KEEP_DAYS days; remove the rest. Returns what was removed."""
    backups = sorted((b for b in _in_folder(folder)), key=lambda b: b.made, reverse=True)
    keep_days: set = set()
    removed = []
    for index, backup in enumerate(backups):
        day = backup.made.date()
        age_days = (now - backup.made).days
        keep = index < KEEP_RECENT or (day not in keep_days and age_days < KEEP_DAYS)
        keep_days.add(day)
        if not keep:
            with contextlib.suppress(OSError):
                backup.path.unlink()
                removed.append(backup.path)
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
    from swiftwriter.store.project import inspect_file

    backup, new = Path(backup).expanduser(), Path(new).expanduser()
    inspect_file(backup)
    if new.exists():
        raise ProjectError(f"{new} already exists: restore to a new name")
    if not new.parent.is_dir():
        raise ProjectError(f"No such folder: {new.parent}")
    tmp = new.with_name(f".{new.name}.restoring")
    try:
        source = sqlite3.connect(backup.resolve().as_uri() + "?mode=ro", uri=True)
        dest = sqlite3.connect(tmp)
        try:
            source.backup(dest)
            dest.execute("PRAGMA journal_mode = WAL")
        finally:
            dest.close()
            source.close()
        os.link(tmp, new)  # never overwrites a name taken meanwhile
    except FileExistsError:
        raise ProjectError(f"{new} already exists: restore to a new name") from None
    except (OSError, sqlite3.Error) as exc:
        raise ProjectError(f"Could not restore {backup.name}: {exc}") from exc
    finally:
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            with contextlib.suppress(OSError):
                leftover.unlink()
    return new


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

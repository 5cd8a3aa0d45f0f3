"""Write an export beside its target and rename it into place, so a failed or interrupted
export never leaves half a file where the writer expects a finished one.

The target must be an ordinary writable file or a new name: a link, a pipe, a device or a
read-only file is refused, never replaced or written through. The replacement is the one
helper every whole-file write uses (swiftwriter/atomic.py): synced to disk before it takes the
name; temporary files an interrupted export left behind are removed on the next export to the
same name. An export never replaces the project it reads, nor a
file SQLite or the lock keeps beside it, however the target is spelled (`refuse_project_files`)."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

from swiftwriter import atomic
from swiftwriter.errors import UserError

# What SQLite and the lock keep beside a project; replacing one loses or unlocks the project.
COMPANIONS = ("-wal", "-shm", "-journal", ".lock")


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)  # through links: a link names the file it points to
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def refuse_project_files(out: Path | str, project: Path | str | None) -> None:
    """Refuse `out` when it is the project or one of its companion files under any spelling:
    existing files are compared by identity (device and inode: a hard link, a symbolic link,
    a relative name or `..` all match), names that do not exist yet by their real folder."""
    if project is None:
        return
    out, project = Path(out).expanduser(), Path(project).expanduser()
    out_id, out_real = _identity(out), os.path.realpath(out)
    for base in {project.absolute(), Path(os.path.realpath(project))}:
        for suffix in ("", *COMPANIONS):
            mine = base.with_name(base.name + suffix)
            if out_real == os.path.realpath(mine) or (
                out_id is not None and out_id == _identity(mine)
            ):
                what = (
                    f"the project {project.name} itself"
                    if not suffix
                    else f"{mine.name}, a file kept beside the project"
                )
                raise UserError(f"{out} is {what}: not replaced; export to another name")


def _check_target(out: Path) -> None:
    if out.is_symlink():
        raise UserError(f"{out} is a symbolic link: export to the file itself, or another name")
    if out.is_dir():
        raise UserError(f"{out} is a folder; give a file name to export to")
    if not out.parent.is_dir():
        raise UserError(f"No such folder: {out.parent}")
    if out.exists():
        mode = out.stat().st_mode
        if not stat.S_ISREG(mode):
            raise UserError(f"{out} is not an ordinary file (a pipe or a device): not replaced")
        if not os.access(out, os.W_OK):
            raise UserError(f"{out} is read-only: not replaced; choose another name")


def _partial_prefix(out: Path) -> str:
    """'.NAME.' before the temporary file's random part and '.partial'; for a name so long
    that this would pass the file system's 255 bytes, its start and a hash of the whole name."""
    name = os.fsencode(out.name)
    if len(name) <= 200:
        return f".{out.name}."
    return f".{out.name[:40]}~{hashlib.sha256(name).hexdigest()[:16]}."


def _remove_stale_partials(out: Path) -> None:
    """Temporary files of earlier exports to this name that never finished (a killed app)."""
    for stale in out.parent.glob(glob.escape(_partial_prefix(out)) + "*.partial"):
        with contextlib.suppress(OSError):
            if stale.is_file() and not stale.is_symlink():
                stale.unlink()


def check_target(out: Path | str, project: Path | str | None = None) -> Path:
    """What an export to `out` would refuse, checked before any work: the app says so at once
    instead of after laying out the whole manuscript."""
    out = Path(out).expanduser()
    refuse_project_files(out, project)
    try:
        _check_target(out)
    except OSError as exc:  # a name longer than the file system allows, a loop of links
        raise UserError(f"Could not export to {out}: {exc.strerror or exc}") from exc
    return out


def write_atomically(out: Path | str, write: Callable[[str], None], job=None) -> Path:
    """Call `write(tmp_path)`, then rename the temporary file over `out` (atomic.replace_with:
    synced first). Any failure of the disk (full, read-only, too large) is one clear UserError
    and leaves `out` as it was; so does a Cancel (`job`, an ExportJob, asked once the
    temporary is written: ExportCancelled)."""
    out = check_target(out)
    _remove_stale_partials(out)

    def write_then_check(tmp: str) -> None:
        write(tmp)
        if job is not None:
            job.check()

    try:
        atomic.replace_with(out, write_then_check, mode=0o644, prefix=_partial_prefix(out))
    except OSError as exc:
        raise UserError(f"Could not export to {out}: {exc.strerror or exc}") from exc
    return out

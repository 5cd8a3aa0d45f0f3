"""Replacing a file whole, so a crash, a full disk or a cancelled export leaves the old file or
the new one, never half of either: a temporary beside the real file (a symbolic link stays a
link, its target gets the content), synced, then renamed over it, keeping an existing file's
mode. `replace_with` lets the writer stream into the temporary (a Word document, a converted
export); `locked` serialises a read-modify-write of a file shared between processes."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from swiftwriter import paths

PARTIAL = ".partial"  # the temporary's suffix: stale ones are found by it


def _sync(path: str | Path, directory: bool = False) -> None:
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        if directory:  # some platforms cannot open a folder: the rename is still atomic
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not directory:
            raise
    finally:
        os.close(fd)


def replace_with(
    path: Path | str,
    write: Callable[[str], None],
    *,
    mode: int | None = None,
    prefix: str | None = None,
) -> Path:
    """Call `write(temporary_path)`, sync what it wrote, then rename it over `path` (through a
    symbolic link, onto its target). `mode`: the new file's permissions (None: an existing
    file's, else mkstemp's private 0600). Any exception leaves `path` as it was and no
    temporary behind; returns the file that was replaced."""
    target = Path(os.path.realpath(path))
    fd, tmp = tempfile.mkstemp(
        prefix=prefix or f".{target.name}.", suffix=PARTIAL, dir=target.parent
    )
    os.close(fd)
    try:
        write(tmp)
        _sync(tmp)
        if mode is not None:
            os.chmod(tmp, mode)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.chmod(tmp, stat.S_IMODE(target.stat().st_mode))
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync(target.parent, directory=True)
    return target


def replace_text(path: Path | str, text: str) -> None:
    replace_with(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def replace_bytes(path: Path | str, data: bytes) -> None:
    replace_with(path, lambda tmp: Path(tmp).write_bytes(data))


def lock_file(path: Path | str) -> Path:
    """Where the lock for `path` lives: in the cache's `locks/` folder, named by the real
    path's digest, so that a writer's own folders (a registry kept in dotfiles through a link)
    never gain a stray `.lock` file."""
    real = os.path.realpath(path)
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:32]
    folder = paths.cache_dir() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{Path(real).name[:40]}-{digest}.lock"


@contextlib.contextmanager
def locked(path: Path | str, timeout_s: float = 60) -> Iterator[None]:
    """Hold an exclusive lock on `path` (its real path, through links) while reading,
    changing and replacing it: two processes (the app and a `swiftwriter models` command)
    updating it at once would otherwise lose one's change. Raises OSError (filelock.Timeout
    is one) when the lock cannot be had."""
    from filelock import FileLock  # lazy: filelock, only to write a shared file

    with FileLock(lock_file(path), timeout=timeout_s):
        yield

"""Replacing a small text file whole, so a crash or a full disk leaves the old file or the new
one, never half of either: a temporary beside the real file (a symbolic link stays a link, its
target gets the text), synced, then renamed over it, keeping an existing file's mode."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


def replace_text(path: Path, text: str) -> None:
    target = Path(os.path.realpath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, stat.S_IMODE(target.stat().st_mode))
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

"""Write an export beside its target and rename it into place, so a failed or interrupted
export never leaves half a file where the writer expects a finished one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from swiftwriter.errors import UserError


def write_atomically(out: Path | str, write: Callable[[str], None]) -> Path:
    """Call `write(tmp_path)`, then rename the temporary file over `out`."""
    out = Path(out).expanduser()
    if out.is_dir():
        raise UserError(f"{out} is a folder; give a file name to export to")
    if not out.parent.is_dir():
        raise UserError(f"No such folder: {out.parent}")
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; an export is an ordinary file
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out

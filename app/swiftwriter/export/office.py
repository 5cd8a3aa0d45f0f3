"""ODT and PDF through LibreOffice: the DOCX export, converted by `soffice --headless` in a
scratch folder with its own profile (no clash with a LibreOffice the writer has open), then
moved into place atomically. Offered only where LibreOffice is installed."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from swiftwriter.errors import UserError
from swiftwriter.export.files import write_atomically

TIMEOUT_S = 180


def soffice() -> str | None:
    return shutil.which("soffice") or shutil.which("libreoffice")


def convert(source: Path, fmt: str, folder: Path) -> Path:
    """`source` converted to `fmt` (odt or pdf) inside `folder`."""
    program = soffice()
    if program is None:
        raise UserError(
            f"Exporting to {fmt.upper()} needs LibreOffice (Debian/Ubuntu: sudo apt-get install "
            "libreoffice-writer); export to Word and convert it yourself instead"
        )
    profile = folder / "profile"
    try:
        done = subprocess.run(
            [program, f"-env:UserInstallation={profile.as_uri()}", "--headless",
             "--convert-to", fmt, "--outdir", str(folder), str(source)],
            capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        raise UserError(f"LibreOffice took more than {TIMEOUT_S} s to convert") from exc
    result = folder / f"{source.stem}.{fmt}"
    if done.returncode != 0 or not result.is_file():
        detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise UserError(f"LibreOffice could not convert the export: {detail[0]}")
    return result


def export_via_libreoffice(manuscript, out: Path | str, fmt: str, **docx_options) -> int:
    from swiftwriter.export.docx_out import export_docx

    with tempfile.TemporaryDirectory(prefix="swiftwriter-export-") as scratch:
        folder = Path(scratch)
        source = folder / "export.docx"
        removed = export_docx(manuscript, source, **docx_options)
        result = convert(source, fmt, folder)
        write_atomically(out, lambda tmp: shutil.copyfile(result, tmp))
    return removed

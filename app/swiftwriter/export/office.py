"""ODT and PDF through LibreOffice: the DOCX export, converted by `soffice --headless` in a
scratch folder with its own profile (no clash with a LibreOffice the writer has open), then
moved into place atomically. Offered only where LibreOffice is installed.

LibreOffice runs in its own process group: a Cancel (the job's `should_stop`, asked ten times
a second) or the time limit kills it with the helpers it started, and the scratch folder goes
with them, so nothing half-converted is left anywhere."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from swiftwriter.errors import UserError
from swiftwriter.export.files import write_atomically
from swiftwriter.export.job import ExportJob

TIMEOUT_S = 180
POLL_S = 0.1


def soffice() -> str | None:
    return shutil.which("soffice") or shutil.which("libreoffice")


def _kill(process: subprocess.Popen) -> None:
    """The converter and whatever it started (soffice starts soffice.bin)."""
    try:
        if os.name == "posix":
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def _run(command: list[str], job: ExportJob) -> tuple[int, str]:
    """Run `command`, asking `job` whether to stop while it runs; (exit status, its output)."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=os.name == "posix",
    )  # fmt: skip
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while True:
            try:
                out, err = process.communicate(timeout=POLL_S)
                return process.returncode, (err or out)
            except subprocess.TimeoutExpired:
                job.check()
                if time.monotonic() > deadline:
                    raise UserError(
                        f"LibreOffice took more than {TIMEOUT_S} s to convert"
                    ) from None
    finally:
        if process.poll() is None:
            _kill(process)


def convert(source: Path, fmt: str, folder: Path, job: ExportJob | None = None) -> Path:
    """`source` converted to `fmt` (odt or pdf) inside `folder`."""
    program = soffice()
    if program is None:
        raise UserError(
            f"Exporting to {fmt.upper()} needs LibreOffice (Debian/Ubuntu: sudo apt-get install "
            "libreoffice-writer); export to Word and convert it yourself instead"
        )
    profile = folder / "profile"
    status, output = _run(
        [program, f"-env:UserInstallation={profile.as_uri()}", "--headless",
         "--convert-to", fmt, "--outdir", str(folder), str(source)],
        job or ExportJob(),
    )  # fmt: skip
    result = folder / f"{source.stem}.{fmt}"
    if status != 0 or not result.is_file():
        detail = output.strip().splitlines()[-1:] or ["no output"]
        raise UserError(f"LibreOffice could not convert the export: {detail[0]}")
    return result


def export_via_libreoffice(
    manuscript, out: Path | str, fmt: str, job: ExportJob | None = None, **docx_options
) -> int:
    from swiftwriter.export.docx_out import export_docx  # lazy: pulls in docx

    job = job or ExportJob()
    with tempfile.TemporaryDirectory(prefix="swiftwriter-export-") as scratch:
        folder = Path(scratch)
        source = folder / "export.docx"
        job.stage("Laying out the document…")
        removed = export_docx(manuscript, source, job=job, **docx_options)
        job.stage(f"LibreOffice is converting it to {fmt.upper()}…")
        result = convert(source, fmt, folder, job)
        job.stage("Saving…")
        write_atomically(out, lambda tmp: shutil.copyfile(result, tmp), job=job)
    return removed

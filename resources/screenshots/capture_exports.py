"""The first pages of the sample project exported as a novel, a report and in Standard Manuscript
Format, converted to PDF by LibreOffice and rendered with pdftoppm, for the README.

Usage (needs LibreOffice and poppler-utils):
    .venv/bin/python resources/screenshots/capture_exports.py
Writes export-novel.png, export-report.png and export-manuscript.png next to this file."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    from swiftwriter.export import manuscript_from_project
    from swiftwriter.export.layout import PageSetup
    from swiftwriter.export.request import ExportRequest, export_manuscript
    from swiftwriter.store import Project
    from swiftwriter.ui.welcome import create_sample_project

    scratch = Path(tempfile.mkdtemp(prefix="swiftwriter-exports-"))
    os.environ["SWIFTWRITER_CONFIG_DIR"] = str(scratch / "config")  # not the writer's own
    with Project.open(create_sample_project(scratch)) as project:
        manuscript = manuscript_from_project(project)
    contact = "Ada Writer\n12 Harbour Lane, Aldermouth\nada@example.org"
    for style, pages in (("novel", (1, 3)), ("report", (1, 3)), ("manuscript", (1, 3))):
        pdf = scratch / f"{style}.pdf"
        request = ExportRequest(
            fmt="pdf", style=style, author="Ada Writer", page=PageSetup("a4", contact)
        )
        export_manuscript(manuscript, pdf, request)
        prefix = scratch / style
        first, last = pages
        subprocess.run(
            [
                "pdftoppm",
                "-png",
                "-r",
                "40",
                "-f",
                str(first),
                "-l",
                str(last),
                str(pdf),
                str(prefix),
            ],
            check=True,
        )
        shots = sorted(scratch.glob(f"{style}-*.png"))
        target = HERE / f"export-{style}.png"
        subprocess.run(
            ["convert", *map(str, shots), "-bordercolor", "#999999", "-border", "1", "+append",
             str(target)],
            check=True,
        )  # fmt: skip
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

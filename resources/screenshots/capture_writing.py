"""Screenshots of the writing tools under a real X server (Xvfb) with the default model loaded,
for the README: the Outline, focus mode and the Export dialog, on the sample project.

Usage (needs xvfb and ImageMagick's `import`):
    xvfb-run -a -s "-screen 0 1280x860x24" .venv/bin/python resources/screenshots/capture_writing.py
Writes outline.png, focus-mode.png and export-dialog.png next to this file."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def shoot(name: str, crop: str | None = None) -> None:
    args = ["import", "-window", "root"] + (["-crop", crop] if crop else [])
    subprocess.run([*args, str(HERE / name)], check=True)
    print(f"wrote {HERE / name}", flush=True)


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="swiftwriter-shots-"))
    os.environ["SWIFTWRITER_CONFIG_DIR"] = str(scratch / "config")
    from PySide6.QtCore import QTimer
    from shots import window_on
    from swiftwriter.store import Project, planning
    from swiftwriter.ui.welcome import create_sample_project

    path = create_sample_project(scratch)
    with Project.open(path) as project:
        docs = project.documents()
        project.set_synopsis(docs[1].id, "Elena comes home to Aldermouth after eleven years.")
        project.set_synopsis(docs[2].id, "A letter from Tom: he is coming home, with no money.")
        planning.set_status(project, docs[1].id, "revised")
        planning.set_status(project, docs[2].id, "draft")
        planning.set_project_target(project, 90000)
    app, window = window_on(path)

    def on_ready(_loaded) -> None:
        window.tree.select(window.project.documents()[1].id)
        outline = window.open_outline()
        outline.resize(980, 360)
        outline.move(150, 200)
        QTimer.singleShot(1200, lambda: (shoot("outline.png", "1000x380+140+190"), outline.close(),
                                         focus()))  # fmt: skip

    def focus() -> None:
        window.focus.enter()
        QTimer.singleShot(1200, lambda: (shoot("focus-mode.png"), window.focus.leave(), export()))

    def export() -> None:
        dialog = window.exchange.export_dialog()
        dialog.style.setCurrentIndex(dialog.style.findData("manuscript"))
        dialog.author.setText("Ada Writer")
        dialog.contact.setPlainText("Ada Writer\n12 Harbour Lane, Aldermouth")
        dialog.move(360, 90)
        QTimer.singleShot(1200, lambda: (shoot("export-dialog.png", "580x680+350+80"), app.quit()))

    window.model_ready.connect(on_ready)
    window.model_failed.connect(lambda message: (print(message), app.exit(3)))
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())

"""Three alternatives of a selected passage, side by side, under a real X server (Xvfb) with
the default model, for the README and the manual: the app's selection tools (Describe).

Usage (needs xvfb and ImageMagick's `import`):
    xvfb-run -a -s "-screen 0 1280x860x24" .venv/bin/python \
        resources/screenshots/capture_alternatives.py [PROMPT] [TOOL]
PROMPT is a held-out suite prompt's name (default: ferry), TOOL a selection tool (describe).
Writes alternatives.png next to this file and prints the chooser's status line."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    prompt = sys.argv[1] if len(sys.argv) > 1 else "ferry"
    tool = sys.argv[2] if len(sys.argv) > 2 else "describe"
    from PySide6.QtCore import QTimer
    from PySide6.QtGui import QTextCursor
    from shots import window_on
    from swiftwriter.bench.suite import load_suite
    from swiftwriter.store import Project

    text = {p.name: p for p in load_suite("held-out")}[prompt].text.strip()
    folder = Path(tempfile.mkdtemp(prefix="swiftwriter-shots-"))
    os.environ["SWIFTWRITER_CONFIG_DIR"] = str(folder / "config")  # not the writer's own
    path = folder / f"{prompt.title()}.swiftwriter"
    with Project.create(path, title=prompt.title()) as project:
        project.add_document("Chapter 1", text)
    app, window = window_on(path)

    def on_ready(_loaded) -> None:
        window.tree.select(window.project.documents()[0].id)
        editor = window.editor
        body = editor.toPlainText()
        start = body.rfind("\n\n", 0, len(body) - 200) + 2  # the last paragraph
        cursor = editor.textCursor()
        cursor.setPosition(start)
        cursor.setPosition(len(body), QTextCursor.MoveMode.KeepAnchor)
        editor.setTextCursor(cursor)
        dialog = window.selection.start(tool)
        dialog.move(90, 140)
        poll.start(500)

    def check() -> None:
        if window.selection.result is None or window.selection.busy:
            return
        poll.stop()
        print(window.selection.dialog.status.text(), flush=True)
        QTimer.singleShot(1500, shoot)

    def shoot() -> None:
        target = HERE / "alternatives.png"
        subprocess.run(["import", "-window", "root", str(target)], check=True)
        print(f"wrote {target}", flush=True)
        app.quit()

    poll = QTimer()
    poll.timeout.connect(check)
    window.model_ready.connect(on_ready)
    window.model_failed.connect(lambda message: (print(message), app.exit(3)))
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())

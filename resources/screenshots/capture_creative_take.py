"""A 1,000-word take in the app's default mode (Creative: sampled) on a held-out suite prompt,
under a real X server (Xvfb) with the default model, for the README: the Speed dock's measured
speedup over plain decoding at the end of the take.

Usage (needs xvfb and ImageMagick's `import`):
    xvfb-run -a -s "-screen 0 1280x860x24" .venv/bin/python \
        resources/screenshots/capture_creative_take.py [PROMPT] [WORDS]
PROMPT is a held-out suite prompt's name (default: orchard), WORDS the take's length (1000).
Writes creative-take.png next to this file and prints the dock's figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def shoot(name: str) -> None:
    subprocess.run(["import", "-window", "root", str(HERE / name)], check=True)
    print(f"wrote {HERE / name}", flush=True)


def main() -> int:
    prompt = sys.argv[1] if len(sys.argv) > 1 else "orchard"
    words = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    from PySide6.QtCore import QTimer
    from PySide6.QtGui import QTextCursor
    from shots import window_on
    from swiftwriter.bench.suite import load_suite
    from swiftwriter.store import Project

    text = {p.name: p for p in load_suite("held-out")}[prompt].text
    folder = Path(tempfile.mkdtemp(prefix="swiftwriter-shots-"))
    os.environ["SWIFTWRITER_CONFIG_DIR"] = str(folder / "config")  # not the writer's own
    path = folder / "Orchard.swiftwriter"
    with Project.create(path, title=prompt.title()) as project:
        project.add_document("Chapter 1", text.strip())
    app, window = window_on(path)

    def on_ready(_loaded) -> None:
        window.tree.select(window.project.documents()[0].id)
        mode = "Precise" if window.panel.precise.isChecked() else "Creative"
        print(f"mode: {mode}, strategy: {window.panel.preset.currentText()}", flush=True)
        window.panel.set_target(words, "words")
        window.actions_by_name["generate"].trigger()

    def on_done(result: dict) -> None:
        stats = result.get("stats", {})
        keys = ("tokens", "tokens_per_s", "tau", "speedup_vs_plain", "plain_tokens_per_s",
                "plain_measured", "dtype", "status")  # fmt: skip
        print(json.dumps({k: stats.get(k, result.get(k)) for k in keys}), flush=True)
        print("dock: " + window.stats_dock.labels["speedup"].text(), flush=True)
        window.editor.moveCursor(QTextCursor.MoveOperation.End)  # the take's end in view
        window.editor.ensureCursorVisible()
        QTimer.singleShot(1500, lambda: (shoot("creative-take.png"), app.quit()))

    window.model_ready.connect(on_ready)
    window.model_failed.connect(lambda message: (print(message), app.exit(3)))
    window.takes.finished.connect(on_done)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())

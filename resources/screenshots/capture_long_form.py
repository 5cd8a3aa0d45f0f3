"""Screenshots of the long-form loop on the default model under a real X server (Xvfb), for the
README: the context viewer on a three-chapter project, and a long take in progress.

Usage (needs xvfb and ImageMagick's `import`):
    xvfb-run -a -s "-screen 0 1280x860x24" .venv/bin/python resources/screenshots/capture_long_form.py
Writes context-viewer.png and long-take.png next to this file."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHAPTERS = (
    (
        "Chapter 1: The tower",
        "Elena Marsh had kept the light at Aldermouth for eleven years, and in all that time the "
        "lamp had never failed. She climbed the tower each evening at dusk, trimmed the wick, "
        "polished the great lens with a cloth her mother had hemmed, and wrote the weather in a "
        "ledger that went back to 1871. The town below forgot her most days, which suited her.",
    ),
    (
        "Chapter 2: The letter",
        "The letter came on the Tuesday boat, addressed in a hand she had not seen since she was "
        "nineteen. Her brother Tom wrote that he was coming home, that he had no money and no "
        "plans, and that he was sorry. Elena read it twice at the kitchen table, then put it in "
        "the ledger between two pages of fog, where she would not have to look at it.",
    ),
    (
        "Chapter 3: The storm",
        "By Thursday the barometer had fallen further than Elena had ever seen it. The fishing "
        "boats stayed in the harbour, the gulls came inland, and at four in the afternoon the sky "
        "to the west turned the colour of a bruise.",
    ),
)


def shoot(name: str) -> None:
    subprocess.run(["import", "-window", "root", str(HERE / name)], check=True)
    print(f"wrote {HERE / name}", flush=True)


def main() -> int:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication
    from swiftwriter.store import Project
    from swiftwriter.ui.main_window import MainWindow

    folder = Path(tempfile.mkdtemp(prefix="swiftwriter-shots-"))
    os.environ["SWIFTWRITER_CONFIG_DIR"] = str(folder / "config")  # not the writer's own
    path = folder / "Aldermouth.swiftwriter"
    with Project.create(path, title="Aldermouth") as project:
        project.set_memory("A lighthouse keeper's novel; quiet, close third person, past tense.")
        for title, text in CHAPTERS:
            project.add_document(title, text)
    app = QApplication(sys.argv[:1])
    window = MainWindow(project=path)
    window.ask = lambda title, text: True
    window.resize(1280, 860)
    window.show()
    steps = []

    def on_ready(_loaded) -> None:
        third = window.project.documents()[2].id
        window.tree.select(third)
        window.panel.direction.setText("The lamp goes out in the middle of the storm.")
        window.panel.story_mode.setCurrentText("As many as fit")
        dialog = window.show_context()
        dialog.resize(900, 620)
        QTimer.singleShot(1500, lambda: (shoot("context-viewer.png"), dialog.close(), take()))

    def take() -> None:
        window.panel.set_target(2000, "words")
        window.takes.measure_baseline = False
        window.actions_by_name["generate"].trigger()
        QTimer.singleShot(45000, lambda: (shoot("long-take.png"), finish()))

    def finish() -> None:
        window.takes.stop()
        window.takes.wait()
        steps.append("done")
        app.quit()

    window.model_ready.connect(on_ready)
    window.model_failed.connect(lambda message: (print(message), app.exit(3)))
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())

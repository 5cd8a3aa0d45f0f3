"""Screenshots of what a writer is told about models under a real X server (Xvfb): the welcome
screen and the Models dialog saying what the built-in model is for, which size of model writes
fiction on this machine, and how to add one with the memory it takes.

Usage (needs xvfb and ImageMagick's `import`):
    xvfb-run -a -s "-screen 0 1400x900x24" .venv/bin/python resources/screenshots/capture_guidance.py
Writes welcome-guidance.png and model-manager-guidance.png next to this file. The data, config,
cache and log folders are temporary ones: the converted models are reached through links and
the speed measurements are a copy, so the texts show this machine's figures and nothing of the
writer's own folders changes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
AT = (40, 30)  # where the windows are put on the screen (no window manager: no frame)


def borrow_folders() -> None:
    """Temporary folders, with read-only use of the writer's converted models and a copy of
    the measurements (their speed goes into the texts)."""
    from swiftwriter import paths

    models, measurements = paths.models_dir(), paths.data_dir() / "measurements.json"
    root = Path(tempfile.mkdtemp(prefix="swiftwriter-shots-"))
    for name in ("data", "config", "cache", "log"):
        os.environ[f"SWIFTWRITER_{name.upper()}_DIR"] = str(root / name)
    os.environ["SWIFTWRITER_MODELS_DIR"] = str(root / "models")
    os.environ["SWIFTWRITER_SETTINGS_PATH"] = str(root / "config" / "settings.ini")
    (root / "models").mkdir()
    (root / "data").mkdir()
    if models.is_dir():
        for folder in models.iterdir():
            if folder.is_dir() and not folder.name.startswith("."):
                (root / "models" / folder.name).symlink_to(folder, target_is_directory=True)
    if measurements.is_file():
        shutil.copyfile(measurements, root / "data" / "measurements.json")


def shoot(widget, name: str) -> None:
    top_left = widget.mapToGlobal(widget.rect().topLeft())
    crop = f"{widget.width()}x{widget.height()}+{top_left.x()}+{top_left.y()}"
    target = HERE / name
    subprocess.run(["import", "-window", "root", "-crop", crop, str(target)], check=True)
    print(f"wrote {target}", flush=True)


def main() -> int:
    borrow_folders()
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication
    from swiftwriter.ui.main_window import MainWindow

    app = QApplication(sys.argv[:1])
    window = MainWindow(load_model=False)
    window.resize(1100, 720)
    window.move(*AT)
    window.show()
    print(window.welcome.guidance.text(), flush=True)

    def models() -> None:
        dialog = window.models.open_models()
        dialog.resize(900, 660)
        dialog.move(*AT)
        dialog.raise_()
        print(dialog.guidance.text(), flush=True)
        QTimer.singleShot(1500, lambda: (shoot(dialog, "model-manager-guidance.png"), app.quit()))

    QTimer.singleShot(1500, lambda: (shoot(window, "welcome-guidance.png"), models()))
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())

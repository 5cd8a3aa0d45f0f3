"""A screenshot of the Models dialog under a real X server (Xvfb), for the README: the default
model spread over CPU and disk within a 300 MiB CPU limit at 4,096 tokens of context, with the memory estimate.

Usage (needs xvfb and ImageMagick's `import`):
    xvfb-run -a -s "-screen 0 1280x860x24" .venv/bin/python resources/screenshots/capture_models.py
Writes models-dialog.png next to this file; settings go to a temporary folder."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    os.environ["SWIFTWRITER_CONFIG_DIR"] = tempfile.mkdtemp(prefix="swiftwriter-shots-")
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication
    from swiftwriter.ui.main_window import MainWindow

    app = QApplication(sys.argv[:1])
    window = MainWindow(load_model=False)
    window.resize(1280, 860)
    window.show()

    def open_dialog() -> None:
        dialog = window.models.open_models()
        dialog.resize(900, 640)
        dialog.move(190, 110)
        dialog.table.selectRow(0)
        dialog.device.setCurrentText("spread")
        dialog.max_memory.setText("cpu=300MiB")
        dialog.max_memory.editingFinished.emit()
        dialog.context.setValue(4096)
        print(dialog.estimate.text(), flush=True)
        QTimer.singleShot(1500, lambda: (shoot(), app.quit()))

    def shoot() -> None:
        target = HERE / "models-dialog.png"
        subprocess.run(
            ["import", "-window", "root", "-crop", "920x660+180+100", str(target)], check=True
        )
        print(f"wrote {target}", flush=True)

    QTimer.singleShot(800, open_dialog)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())

"""Start the desktop app."""

from __future__ import annotations

import os
import sys


def run_app(model: str | None = None, project: str | None = None) -> int:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from swiftwriter.ui.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setOrganizationName("SwiftWriter")
    app.setApplicationName("SwiftWriter")
    window = MainWindow(model=model, project=project)
    window.show()
    # For packaging checks and the start-up test: quit once the model is ready (or failed).
    if os.environ.get("SWIFTWRITER_EXIT_WHEN_READY") == "1":
        window.model_ready.connect(
            lambda loaded: (
                print(f"ready: {loaded.entry.id}", flush=True),
                QTimer.singleShot(0, app.quit),
            )
        )
        window.model_failed.connect(lambda msg: (print(f"failed: {msg}", flush=True), app.exit(3)))
    return app.exec()

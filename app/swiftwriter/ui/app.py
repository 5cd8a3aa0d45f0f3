"""Start the desktop app."""

from __future__ import annotations

import os
import sys


def run_app(model: str | None = None, project: str | None = None) -> int:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from swiftwriter import logs
    from swiftwriter.ui.main_window import MainWindow

    logs.setup()
    logs.log.info("SwiftWriter starts")
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setOrganizationName("SwiftWriter")
    app.setApplicationName("SwiftWriter")
    window = MainWindow(model=model, project=project)

    def excepthook(kind, exc, tb):  # a slot that raised: log it, tell the writer, keep going
        window.show_error("Something went wrong", logs.unexpected("An action", exc))

    sys.excepthook = excepthook
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

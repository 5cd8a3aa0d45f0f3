"""What the capture scripts share: the app's main window on a project, laid out the same way
for every picture (1280x860 at the screen's corner, every question answered yes)."""

from __future__ import annotations

import sys


def window_on(path):
    """(the QApplication, the shown MainWindow on the project at `path`)."""
    from PySide6.QtWidgets import QApplication
    from swiftwriter.ui.main_window import MainWindow

    app = QApplication(sys.argv[:1])
    window = MainWindow(project=path)
    window.ask = lambda title, text: True
    window.resize(1280, 860)
    window.move(0, 0)
    window.show()
    return app, window

"""Start the desktop app."""

from __future__ import annotations

import ctypes.util
import logging
import os
import sys

from swiftwriter import __version__, logs, paths

log = logging.getLogger(__name__)
DESKTOP_ID = "org.swiftwriter.SwiftWriter"  # packaging/'s .desktop and AppStream files
XCB_HINT = (
    "SwiftWriter needs Qt's xcb libraries to open a window here: on Debian/Ubuntu "
    "`sudo apt-get install libxcb-cursor0 libxkbcommon-x11-0 libxcb-icccm4 libxcb-keysyms1`, "
    "on Fedora `sudo dnf install xcb-util-cursor libxkbcommon-x11`"
)


def xcb_hint() -> str | None:
    """The one-line install hint when Qt's xcb platform plugin cannot load on this Linux
    desktop (Qt itself would abort with a message that names no package)."""
    platform = os.environ.get("QT_QPA_PLATFORM", "")
    if not sys.platform.startswith("linux") or platform not in ("", "xcb"):
        return None
    if not os.environ.get("DISPLAY") and platform == "":
        return None  # Wayland or no display: Qt picks another plugin or says so itself
    missing = [
        name for name in ("xcb-cursor", "xkbcommon-x11") if not ctypes.util.find_library(name)
    ]
    return XCB_HINT if missing else None


def run_app(model: str | None = None, project: str | None = None) -> int:
    # The command line imports this module: Qt and the window (torch with it) wait for the app.
    from PySide6.QtCore import QTimer  # lazy: PySide6, only when the app runs
    from PySide6.QtWidgets import QApplication  # lazy: PySide6, only when the app runs

    from swiftwriter.ui.main_window import MainWindow  # lazy: PySide6 and torch, as above

    logs.setup()

    log.info(
        "SwiftWriter %s starts (Python %s, %s)", __version__, sys.version.split()[0], sys.platform
    )
    hint = xcb_hint()
    if hint:
        print(hint, file=sys.stderr, flush=True)
        log.warning(hint)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setOrganizationName("SwiftWriter")
    app.setApplicationName("SwiftWriter")
    app.setDesktopFileName(DESKTOP_ID)
    app.setWindowIcon(app_icon())
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


def app_icon():
    from PySide6.QtGui import QIcon  # lazy: PySide6

    return QIcon(str(paths.resources_dir() / "swiftwriter.png"))

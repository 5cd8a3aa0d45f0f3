"""The base of the app's QThread workers (generation, head training); torch-free, so dialogs
that import a worker stay quick to open."""

from __future__ import annotations

import threading

from PySide6.QtCore import QCoreApplication, QObject, Signal

from swiftwriter.errors import UserError


class StoppableWorker(QObject):
    """A QThread worker with a thread-safe stop flag; errors become `failed` messages, never a
    crash, and the object goes back to the GUI thread before its thread ends."""

    failed = Signal(str)
    finished = Signal()  # after done or failed: the thread may quit
    what = "work"  # in the failure message

    def __init__(self):
        super().__init__()
        self._stop = threading.Event()

    def stop(self) -> None:
        """Thread-safe: the engine checks it between two steps."""
        self._stop.set()

    def should_stop(self) -> bool:
        return self._stop.is_set()

    def run(self) -> None:
        try:
            self._run()
        except UserError as exc:
            self.failed.emit(str(exc))
        except Exception as exc:  # noqa: BLE001 - shown to the writer, never a crash
            self.failed.emit(f"The {self.what} failed: {type(exc).__name__}: {exc}")
        finally:
            # Hand this object back to the GUI thread before the worker thread ends, so it is
            # destroyed there: destroyed during the thread's teardown it raced the GUI thread for
            # Qt's connection mutex and the GIL (a deadlock seen once in CI).
            app = QCoreApplication.instance()
            if app is not None:
                self.moveToThread(app.thread())
            self.finished.emit()

    def _run(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError

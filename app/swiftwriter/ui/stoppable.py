"""The base of the app's QThread workers (generation, head training); torch-free, so dialogs
that import a worker stay quick to open."""

from __future__ import annotations

import threading

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal

from swiftwriter import logs
from swiftwriter.errors import UserError, is_native_panic


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
        except BaseException as exc:  # noqa: BLE001 - shown to the writer, never a crash
            if not isinstance(exc, Exception) and not is_native_panic(exc):
                raise

            self.failed.emit(logs.unexpected(f"The {self.what}", exc))
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


def start_worker(parent: QObject, worker: StoppableWorker) -> QThread:
    """Put a worker in its own QThread (not started: the caller connects the signals it needs
    first, queued to the GUI thread because the worker lives in the other thread)."""
    thread = QThread(parent)
    worker.moveToThread(thread)
    thread.started.connect(worker.run)
    # Direct: quit from the worker thread itself, so a GUI thread blocked in wait() is freed.
    worker.finished.connect(thread.quit, Qt.ConnectionType.DirectConnection)
    thread.finished.connect(worker.deleteLater)
    return thread

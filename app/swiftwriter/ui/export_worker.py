"""An export off the GUI thread: laying out a long manuscript and LibreOffice's conversion take
seconds to minutes, and the window must stay responsive meanwhile. The manuscript is read from
the store on the GUI thread (the store's connection lives there); the worker only writes the
file, behind a progress dialog whose Cancel stops it between stages, between sections or by
killing LibreOffice, leaving the target as it was."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QProgressDialog, QWidget

from swiftwriter.export.job import ExportCancelled, ExportJob
from swiftwriter.ui.stoppable import StoppableWorker, start_worker


class ExportWorker(StoppableWorker):
    """Runs `export_manuscript` with a job that reports each stage and asks for Cancel."""

    stage = Signal(str)
    exported = Signal(str)  # the file written
    cancelled = Signal()
    what = "export"

    def __init__(self, manuscript, out: Path, request, project: Path | None):
        super().__init__()
        self.manuscript, self.out, self.request, self.project = manuscript, out, request, project

    def _run(self) -> None:
        from swiftwriter.export.request import export_manuscript  # lazy: docx

        job = ExportJob(should_stop=self.should_stop, report=self.stage.emit)
        try:
            export_manuscript(self.manuscript, self.out, self.request, self.project, job)
        except ExportCancelled:
            self.cancelled.emit()
            return
        self.exported.emit(str(self.out))


class ExportRun(QObject):
    """One running export: its thread, worker and progress dialog. `ended` carries the file
    written, or "" when it failed (`failed` said why first) or was cancelled."""

    failed = Signal(str)
    ended = Signal(str)

    def __init__(self, parent: QWidget, manuscript, out: Path, request, project: Path | None):
        super().__init__(parent)
        self.out = out
        self.result = ""
        self.worker = ExportWorker(manuscript, out, request, project)
        self.thread = start_worker(self, self.worker)
        fmt = request.fmt.upper()
        self.progress = QProgressDialog(f"Exporting to {fmt}…", "Cancel", 0, 0, parent)
        self.progress.setWindowTitle(f"Exporting {out.name}")
        self.progress.setMinimumWidth(460)
        # not modal: the writer keeps writing (the export has its own copy of the text)
        self.progress.setWindowModality(Qt.WindowModality.NonModal)
        self.progress.setMinimumDuration(300)
        self.progress.setAutoClose(False)
        self.progress.setAutoReset(False)
        self.progress.canceled.connect(self.cancel)
        self.worker.stage.connect(self._stage)
        self.worker.exported.connect(self._exported)
        self.worker.failed.connect(self.failed)
        self.thread.finished.connect(self._thread_ended)

    def start(self) -> None:
        self.thread.start()

    def cancel(self) -> None:
        self.progress.setLabelText("Cancelling…")
        self.worker.stop()

    def cancelled(self) -> bool:
        return self.worker.should_stop()

    def wait(self, ms: int = 30000) -> bool:
        """Cancel and wait for the worker (before the window closes); False if it still runs."""
        self.worker.stop()
        return self.thread.wait(ms)

    def _stage(self, text: str) -> None:
        if not self.worker.should_stop():
            self.progress.setLabelText(text)

    def _exported(self, path: str) -> None:
        self.result = path

    def _thread_ended(self) -> None:
        self.progress.close()
        self.progress.deleteLater()
        self.thread.deleteLater()
        self.ended.emit(self.result)


def start_export(parent: QWidget, manuscript, out: Path, request, project) -> ExportRun:
    run = ExportRun(parent, manuscript, out, request, project)
    run.start()
    return run

"""File > Import and File > Export: the window's controller for files coming in and going out.
A file is read or written in a worker behind a progress dialog with Cancel; the window's
`import_done` and `export_done` signals say how each ended."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QFileDialog, QProgressDialog

from swiftwriter.errors import UserError
from swiftwriter.export import manuscript_from_project
from swiftwriter.export.files import check_target
from swiftwriter.store.importing import import_sections
from swiftwriter.ui.export_worker import start_export
from swiftwriter.ui.stoppable import StoppableWorker, start_worker


class ImportWorker(StoppableWorker):
    """Reads a file to import off the GUI thread (store writes stay on the GUI thread)."""

    imported = Signal(object)  # [(level, title, markdown), ...]
    what = "import"

    def __init__(self, path: Path):
        super().__init__()
        self.path = path

    def _run(self) -> None:
        from swiftwriter.export.importers import import_file  # lazy: docx

        sections = import_file(self.path)
        if not self.should_stop():
            self.imported.emit(sections)


class ExportImport(QObject):
    """Exports and imports of the window's project, one of each at a time."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self._import = None  # (thread, worker, progress) while a file is being read
        self._import_count = 0
        self._export = None  # the ExportRun while a file is being written

    @property
    def exporting(self) -> bool:
        return self._export is not None

    def export_dialog(self):
        """File > Export…: the dialog with every choice (ui/export_dialog.py)."""
        if self.window.project is None:
            return None
        from swiftwriter.ui.export_dialog import ExportDialog  # lazy: docx

        self.window.safekeeping.save_now()  # the dialog counts words from the store
        dialog = ExportDialog(self.window)
        dialog.open()
        return dialog

    def export_to(self, path, request="docx", doc_ids=None) -> bool:
        """Start exporting the project (or the documents `doc_ids` with what is below them) as
        `request` asks (an ExportRequest, or just a format name): the file is written in a
        worker behind a progress dialog with Cancel (ui/export_worker.py), and `export_done`
        tells how it ended. False, with the reason shown, when it cannot start (a refused
        target, another export still running)."""
        from swiftwriter.export.request import ExportRequest  # lazy: docx

        if isinstance(request, str):
            request = ExportRequest(fmt=request)
        if self._export is not None:
            self.window.show_error(
                "Export", "Another export is still running; wait for it or cancel it"
            )
            return False
        self.window.safekeeping.save_now()
        try:
            request.check()
            out = check_target(path, self.window.project.path)
            manuscript = manuscript_from_project(self.window.project, doc_ids)
        except (UserError, OSError) as exc:
            self.window.show_error("Export failed", str(exc))
            return False
        self._export = start_export(self.window, manuscript, out, request, self.window.project.path)
        self._export.failed.connect(
            lambda message: self.window.show_error("Export failed", message)
        )
        self._export.ended.connect(self._export_ended)
        return True

    def _export_ended(self, written: str) -> None:
        run, self._export = self._export, None
        if written:
            self.window.statusBar().showMessage(f"Exported to {written}", 8000)
        elif run.cancelled():
            self.window.statusBar().showMessage("Export cancelled: nothing was written", 8000)
        run.deleteLater()
        self.window.export_done.emit(written)

    def wait_for_export(self, ms: int = 30000) -> bool:
        """Before the window closes: a running export is cancelled and waited for."""
        return self._export is None or self._export.wait(ms)

    def import_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self.window, "Import", "", "Documents (*.md *.markdown *.txt *.docx)"
        )
        if path:
            self.import_from(path)

    def import_from(self, path) -> bool:
        """Read the file in a worker (a large Word file takes a while) behind a progress dialog
        with Cancel, then add its sections; `import_done` says how many (0: failed or
        cancelled). False when no import could start."""
        if self.window.project is None or self.window.project.readonly or self._import is not None:
            return False
        worker = ImportWorker(Path(path))
        thread = start_worker(self, worker)
        progress = QProgressDialog(f"Importing {Path(path).name}…", "Cancel", 0, 0, self.window)
        progress.setWindowModality(Qt.WindowModality.WindowModal)
        progress.setMinimumDuration(400)
        progress.canceled.connect(worker.stop)
        worker.imported.connect(self._on_imported)
        worker.failed.connect(self._on_import_failed)
        thread.finished.connect(self._import_ended)
        self._import = (thread, worker, progress)
        self._import_count = 0  # told by `import_done` once the thread has ended
        thread.start()
        return True

    def _on_imported(self, sections) -> None:

        worker = self._import[1] if self._import else None
        if worker is None or worker.should_stop() or self.window.project is None:
            self.window.statusBar().showMessage("Import cancelled: nothing was added", 8000)
            return
        try:
            added = import_sections(self.window.project, sections)
        except UserError as exc:
            self._on_import_failed(str(exc))
            return
        self.window.tree.reload(select=added[0].id if added else None)
        self.window.statusBar().showMessage(f"Imported {len(added)} document(s)", 8000)
        self._import_count = len(added)

    def _on_import_failed(self, message: str) -> None:
        self.window.show_error("Import failed", message)

    def _import_ended(self) -> None:
        """Only now is `import_done` sent: a next import may start from its slot."""
        thread, _, progress = self._import
        self._import = None
        progress.close()
        thread.deleteLater()
        self.window.import_done.emit(self._import_count)

    def wait_for_import(self, ms: int = 30000) -> None:
        """Before the project closes: a running import is cancelled and waited for."""
        if self._import is not None:
            self._import[1].stop()
            self._import[0].wait(ms)

"""The commands that open tool windows or touch files: history, models, settings, export and
import. A mixin of MainWindow, kept apart so the window itself stays about the writing desk."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFileDialog, QProgressDialog

from swiftwriter.errors import UserError
from swiftwriter.ui.settings import SettingsDialog, apply_theme, is_dark
from swiftwriter.ui.stoppable import StoppableWorker, start_worker


class ImportWorker(StoppableWorker):
    """Reads a file to import off the GUI thread (store writes stay on the GUI thread)."""

    imported = Signal(object)  # [(level, title, markdown), ...]
    what = "import"

    def __init__(self, path: Path):
        super().__init__()
        self.path = path

    def _run(self) -> None:
        from swiftwriter.export.importers import import_file

        sections = import_file(self.path)
        if not self.should_stop():
            self.imported.emit(sections)


class ToolsMixin:
    """Needs the window's project, editor, tree, settings, save_now, show_error and the
    `import_done` and `export_done` signals."""

    _import = None  # (thread, worker, progress) while a file is being read
    _export = None  # the ExportRun while a file is being written

    # -- dialogs ----------------------------------------------------------------------------
    def open_history(self):
        from swiftwriter.ui.history_dialog import HistoryDialog

        if self.project is None:
            return None
        self.save_now()
        dialog = HistoryDialog(self.project, self)
        dialog.insert_requested.connect(self.insert_text)
        dialog.open_requested.connect(self.tree.select)
        dialog.snapshot_restored.connect(self._on_snapshot_restored)
        self._dialogs.append(dialog)
        dialog.show()
        return dialog

    def open_lorebook(self, select: int | None = None):
        """The lorebook window (one per project), with the entry `select` chosen."""
        from swiftwriter.ui.lorebook import LorebookDialog

        if self.project is None:
            return None
        dialog = next((d for d in self._dialogs if isinstance(d, LorebookDialog)), None)
        if dialog is None:
            dialog = LorebookDialog(self, select)
            dialog.finished.connect(lambda _=0: self._forget(dialog))
            self._dialogs.append(dialog)
        elif select is not None:
            dialog.select(select)
        dialog.show()
        dialog.raise_()
        return dialog

    def save_lorebook(self) -> None:
        """The lorebook window's edits still waiting for their pause, before a take reads them."""
        from swiftwriter.ui.lorebook import LorebookDialog

        for dialog in self._dialogs:
            if isinstance(dialog, LorebookDialog):
                dialog.save()

    def insert_text(self, text: str) -> None:
        if self.doc_id is not None and not self.editor.isReadOnly():
            self.editor.textCursor().insertText(text)
            self.save_now()

    def _on_snapshot_restored(self, doc_id: int) -> None:
        if doc_id == self.doc_id:
            text = self.project.document(doc_id).text
            self._loading_doc = True
            try:
                self.editor.set_text(text)
                self._saved_text = text
            finally:
                self._loading_doc = False
        self.tree.reload()

    def open_models(self):
        from swiftwriter.ui.model_manager import ModelManagerDialog

        current = self.loaded_model.entry.id if self.loaded_model is not None else None
        dialog = ModelManagerDialog(self.settings, current, self, loaded=self.loaded_model,
                                    generation_busy=lambda: self.takes.busy)  # fmt: skip
        dialog.use_model.connect(self._use_model)
        dialog.drafter_trained.connect(self._on_drafter_trained)
        dialog.model_busy.connect(self._on_model_training)
        self._dialogs.append(dialog)
        dialog.show()
        return dialog

    def _on_drafter_trained(self, model_id: str) -> None:
        """New heads for a model: the loaded one drafts with them from the next generation."""
        loaded = self.loaded_model
        if loaded is None or loaded.entry.id != model_id:
            return
        from swiftwriter.modelstore import loader

        try:
            loaded.drafter, loaded.drafter_status = loader.load_drafter(loaded)
        except Exception as exc:  # noqa: BLE001 - a message, never a crash
            loaded.drafter, loaded.drafter_status = None, f"mismatched: {exc}"
        state = loaded.drafter_status.split(":", 1)[0]
        self.statusBar().showMessage(f"Drafting heads for {loaded.entry.name}: {state}", 8000)

    def _on_model_training(self, busy: bool) -> None:
        self.model_training = busy
        self._update_actions()

    def _use_model(self, model_id: str) -> None:
        self.settings.model = model_id
        self.load_model(model_id)

    def open_settings(self) -> None:
        dialog = SettingsDialog(self.settings, self)
        if dialog.exec():
            self.apply_settings()

    def apply_settings(self) -> None:
        apply_theme(self.settings.theme)
        self.editor.set_dark(is_dark(self.settings.theme))
        self.editor.setFont(self.settings.editor_font)
        self.autosave_timer.setInterval(self.settings.autosave_s * 1000)
        self.spelling.apply()

    # -- import and export ------------------------------------------------------------------
    def export_dialog(self):
        """File > Export…: the dialog with every choice (ui/export_dialog.py)."""
        if self.project is None:
            return None
        from swiftwriter.ui.export_dialog import ExportDialog

        self.save_now()  # the dialog counts words from the store
        dialog = ExportDialog(self)
        dialog.open()
        return dialog

    def export_to(self, path, request="docx", doc_ids=None) -> bool:
        """Start exporting the project (or the documents `doc_ids` with what is below them) as
        `request` asks (an ExportRequest, or just a format name): the file is written in a
        worker behind a progress dialog with Cancel (ui/export_worker.py), and `export_done`
        tells how it ended. False, with the reason shown, when it cannot start (a refused
        target, another export still running)."""
        from swiftwriter.export import manuscript_from_project
        from swiftwriter.export.files import check_target
        from swiftwriter.export.request import ExportRequest
        from swiftwriter.ui.export_worker import start_export

        if isinstance(request, str):
            request = ExportRequest(fmt=request)
        if self._export is not None:
            self.show_error("Export", "Another export is still running; wait for it or cancel it")
            return False
        self.save_now()
        try:
            request.check()
            out = check_target(path, self.project.path)
            manuscript = manuscript_from_project(self.project, doc_ids)
        except (UserError, OSError) as exc:
            self.show_error("Export failed", str(exc))
            return False
        self._export = start_export(self, manuscript, out, request, self.project.path)
        self._export.failed.connect(lambda message: self.show_error("Export failed", message))
        self._export.ended.connect(self._export_ended)
        return True

    def _export_ended(self, written: str) -> None:
        run, self._export = self._export, None
        if written:
            self.statusBar().showMessage(f"Exported to {written}", 8000)
        elif run.cancelled():
            self.statusBar().showMessage("Export cancelled: nothing was written", 8000)
        run.deleteLater()
        self.export_done.emit(written)

    def wait_for_export(self, ms: int = 30000) -> bool:
        """Before the window closes: a running export is cancelled and waited for."""
        return self._export is None or self._export.wait(ms)

    def import_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Import", "", "Documents (*.md *.markdown *.txt *.docx)"
        )
        if path:
            self.import_from(path)

    def import_from(self, path) -> bool:
        """Read the file in a worker (a large Word file takes a while) behind a progress dialog
        with Cancel, then add its sections; `import_done` says how many (0: failed or
        cancelled). False when no import could start."""
        if self.project is None or self.project.readonly or self._import is not None:
            return False
        worker = ImportWorker(Path(path))
        thread = start_worker(self, worker)
        progress = QProgressDialog(f"Importing {Path(path).name}…", "Cancel", 0, 0, self)
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
        from swiftwriter.store.importing import import_sections

        worker = self._import[1] if self._import else None
        if worker is None or worker.should_stop() or self.project is None:
            self.statusBar().showMessage("Import cancelled: nothing was added", 8000)
            return
        try:
            added = import_sections(self.project, sections)
        except UserError as exc:
            self._on_import_failed(str(exc))
            return
        self.tree.reload(select=added[0].id if added else None)
        self.statusBar().showMessage(f"Imported {len(added)} document(s)", 8000)
        self._import_count = len(added)

    def _on_import_failed(self, message: str) -> None:
        self.show_error("Import failed", message)

    def _import_ended(self) -> None:
        """Only now is `import_done` sent: a next import may start from its slot."""
        thread, _, progress = self._import
        self._import = None
        progress.close()
        thread.deleteLater()
        self.import_done.emit(self._import_count)

    def wait_for_import(self, ms: int = 30000) -> None:
        """Before the project closes: a running import is cancelled and waited for."""
        if self._import is not None:
            self._import[1].stop()
            self._import[0].wait(ms)

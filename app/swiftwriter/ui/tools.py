"""The tool windows the window opens on its project: history, lorebook, settings. The window's
controller for them, kept apart so the window itself stays about the writing desk."""

from __future__ import annotations

from PySide6.QtCore import QObject

from swiftwriter.ui.history_dialog import HistoryDialog
from swiftwriter.ui.lorebook import LorebookDialog
from swiftwriter.ui.settings import SettingsDialog, apply_theme, is_dark


class ToolWindows(QObject):
    def __init__(self, window):
        super().__init__(window)
        self.window = window

    # -- dialogs ----------------------------------------------------------------------------
    def open_history(self):
        if self.window.project is None:
            return None
        self.window.safekeeping.save_now()
        dialog = HistoryDialog(self.window.project, self.window)
        dialog.insert_requested.connect(self.insert_text)
        dialog.open_requested.connect(self.window.tree.select)
        dialog.snapshot_restored.connect(self._on_snapshot_restored)
        self.window.open_dialogs.append(dialog)
        dialog.show()
        return dialog

    def open_lorebook(self, select: int | None = None):
        """The lorebook window (one per project), with the entry `select` chosen."""
        if self.window.project is None:
            return None
        dialog = next((d for d in self.window.open_dialogs if isinstance(d, LorebookDialog)), None)
        if dialog is None:
            dialog = LorebookDialog(self.window, select)
            dialog.finished.connect(lambda _=0: self.window.forget_dialog(dialog))
            self.window.open_dialogs.append(dialog)
        elif select is not None:
            dialog.select(select)
        dialog.show()
        dialog.raise_()
        return dialog

    def save_lorebook(self) -> None:
        """The lorebook window's edits still waiting for their pause, before a take reads them."""
        for dialog in self.window.open_dialogs:
            if isinstance(dialog, LorebookDialog):
                dialog.save()

    def insert_text(self, text: str) -> None:
        if self.window.doc_id is not None and not self.window.editor.isReadOnly():
            self.window.editor.textCursor().insertText(text)
            self.window.safekeeping.save_now()

    def _on_snapshot_restored(self, doc_id: int) -> None:
        if doc_id == self.window.doc_id:
            text = self.window.project.document(doc_id).text
            self.window.loading_doc = True
            try:
                self.window.editor.set_text(text)
                self.window.safekeeping.saved_text = text
            finally:
                self.window.loading_doc = False
        self.window.tree.reload()

    def open_settings(self) -> None:
        dialog = SettingsDialog(self.window.settings, self.window)
        if dialog.exec():
            self.apply_settings()

    def apply_settings(self) -> None:
        apply_theme(self.window.settings.theme)
        self.window.editor.set_dark(is_dark(self.window.settings.theme))
        self.window.editor.setFont(self.window.settings.editor_font)
        self.window.autosave_timer.setInterval(self.window.settings.autosave_s * 1000)
        self.window.spelling.apply()

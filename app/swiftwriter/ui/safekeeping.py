"""Never lose typed text: the window's saving, emergency copies and backups (the window's
Safekeeping controller).

- The editor's text is saved a few seconds after the first unsaved change (not after the last:
  a writer typing without pause is still saved), before generations, on switching documents
  and on close; during a take the take's own span is left out (the generation's record is its
  safe copy) and merged when the take ends.
- A save that fails keeps an emergency copy of the text in the data folder, offered back when
  the project is next opened (Not now keeps it for the next time; only a confirmed Discard
  deletes it); closing or switching documents after a failed save asks: Retry, Save the text
  as a file, Discard, or Cancel.
- A backup goes to the data folder on close and every few minutes of writing (store/backups.py);
  File > Backups lists them and restores one as a new project."""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QLabel,
    QListWidget,
    QMessageBox,
    QVBoxLayout,
)

from swiftwriter import atomic, paths
from swiftwriter.errors import UserError
from swiftwriter.export.files import write_atomically
from swiftwriter.store import ProjectError
from swiftwriter.store import backups as backups_mod

BACKUP_EVERY_S = 10 * 60
LEAVING_CHOICES = ("Retry", "Save text as…", "Discard changes", "Cancel")
OFFER_CHOICES = ("Add as a new document", "Discard…", "Not now")  # closing the box: Not now


@dataclass
class EmergencyCopy:
    path: Path
    project: str
    title: str
    text: str
    saved: str


def emergency_dir() -> Path:
    folder = paths.data_dir() / "unsaved"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# The copies this run kept, by project and document or note: their text is still in the editor
# (or the note), so the next good save supersedes them. A copy from an earlier run (offered
# and put off) holds words nothing here holds: a save never replaces or deletes it.
_held: dict[str, Path] = {}


def _held_key(project: Path, key: str) -> str:
    return f"{backups_mod.folder_for(project).name}-{key}"


def keep_emergency_copy(project: Path, key: str, title: str, text: str) -> Path:
    """Write text that could not be saved into the data folder (one file per project and
    document or note in this run, replaced by its newer text, beside any copy an earlier run
    kept); returns where."""
    base = _held_key(project, key)
    target = _held.get(base)
    if target is None:
        target, n = emergency_dir() / f"{base}.json", 2
        while target.exists():
            target, n = emergency_dir() / f"{base}-{n}.json", n + 1
        _held[base] = target
    data = {
        "project": str(Path(project).resolve()),
        "title": title,
        "text": text,
        "saved": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    atomic.replace_text(target, json.dumps(data, ensure_ascii=False))  # synced, never half
    return target


def emergency_copies(project: Path) -> list[EmergencyCopy]:
    """Emergency copies kept for this project, oldest first."""
    prefix = backups_mod.folder_for(project).name + "-"
    found = []
    for path in sorted(emergency_dir().glob(f"{prefix}*.json"), key=lambda p: p.stat().st_mtime):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            found.append(EmergencyCopy(path, data["project"], data["title"], data["text"],
                                       data["saved"]))  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def drop_emergency_copy(project: Path, key: str) -> None:
    """The document or note was saved: the copy this run kept of it is superseded."""
    target = _held.pop(_held_key(project, key), None)
    if target is not None:
        with contextlib.suppress(OSError):
            target.unlink()


def let_go(copy: Path) -> None:
    """The copy was offered back: whatever is done with it, no editor holds its text now."""
    for base in [b for b, path in _held.items() if path == copy]:
        del _held[base]


class Safekeeping(QObject):
    """Saving, leaving safely, emergency copies and backups: the window's controller for
    never losing text. It keeps what was last saved and how the last save went; the window
    asks it before it leaves a document or closes."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.saved_text = ""  # the document's text as last stored (the editor's may differ)
        self.save_failed = False
        self.last_save_error = ""
        self._last_backup = 0.0

    # -- saving -----------------------------------------------------------------------------
    def text_to_save(self) -> str:
        """The document's text as it should be stored now: during a take, without the take."""
        if self.window.takes.busy:
            return self.window.editor.text_without_stream()
        return self.window.editor.toPlainText()

    def save_now(self, force: bool = False, quiet: bool = False) -> bool:
        """Write the editor's text to the store if it changed; True when written. A failure
        keeps an emergency copy and sets `save_failed` (and says so unless `quiet`)."""
        self.window.autosave_timer.stop()
        self.save_failed = False
        if (
            self.window.project is None
            or self.window.doc_id is None
            or self.window.project.readonly
        ):
            return False
        text = self.text_to_save()
        if text == self.saved_text and not force:
            return False
        try:
            if force and self.window.project.document(self.window.doc_id).text == text:
                self.saved_text = text
                self.window.save_label.setText("Saved")
                return False
            self.window.project.update_text(self.window.doc_id, text)
        except ProjectError as exc:
            self._save_failed(f"doc-{self.window.doc_id}", self._doc_title(), text, str(exc), quiet)
            return False
        self.saved_text = text
        self.window.save_label.setText("Saved")
        drop_emergency_copy(self.window.project.path, f"doc-{self.window.doc_id}")
        self._maybe_backup()
        return True

    def _doc_title(self) -> str:
        with contextlib.suppress(ProjectError):
            return self.window.project.document(self.window.doc_id).title
        return f"document {self.window.doc_id}"

    def _save_failed(self, key: str, title: str, text: str, error: str, quiet: bool) -> None:
        self.save_failed = True
        self.window.save_label.setText("Not saved")
        try:
            where = keep_emergency_copy(self.window.project.path, key, title, text)
            kept = f" A copy of the text was kept in {where}."
        except OSError as exc:
            kept = f" No copy could be kept either ({exc.strerror or exc})."
        self.last_save_error = error + kept
        if not quiet:
            self.window.show_error("Could not save", self.last_save_error)

    def on_text_changed(self) -> None:
        if self.window.loading_doc or self.window.project is None or self.window.project.readonly:
            return
        if self.window.editor.streaming_now():  # the take's own text: its record keeps it
            return
        if self.text_to_save() != self.saved_text:
            self.window.save_label.setText("Edited")
            if not self.window.autosave_timer.isActive():  # a deadline from the first change
                self.window.autosave_timer.start()

    # -- leaving a document or the project ------------------------------------------------
    def save_before_leaving(self) -> bool:
        """Save the editor and the notes; when that fails, the writer decides. False: stay."""
        while True:
            self.save_now(quiet=True)
            failed = self.save_failed
            notes_error = "" if self.window.notes.save() else self.window.notes.last_error
            if not failed and not notes_error:
                return True
            error = self.last_save_error if failed else notes_error
            choice = self.window.choose(
                "Could not save",
                f"{error}\n\nRetry, save the text to a file of its own, discard the unsaved "
                "changes, or cancel and stay here?",
                LEAVING_CHOICES,
            )
            if choice == "Retry":
                continue
            if choice == "Save text as…":
                text = self.text_to_save() if failed else self.window.notes.text.toPlainText()
                if self._save_text_as(text):
                    return True
                continue
            return choice == "Discard changes"

    def _save_text_as(self, text: str) -> bool:

        path = self.window.ask_save_path()
        if not path:
            return False
        try:
            write_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
        except UserError as exc:
            self.window.show_error("Could not save the text", str(exc))
            return False
        return True

    # -- emergency copies and backups -------------------------------------------------------
    def offer_emergency_copies(self) -> None:
        """Text a failed save kept for this project, offered back as new documents. A copy is
        deleted only once added back or after a confirmed Discard: Not now keeps it for the
        next time the project opens."""
        if self.window.project is None or self.window.project.readonly:
            return
        for copy in emergency_copies(self.window.project.path):
            let_go(copy.path)
            words = len(copy.text.split())
            choice = self.window.choose(
                "Unsaved text was kept",
                f"{words:,} words typed in “{copy.title}” could not be saved on {copy.saved}. "
                f"Add them back as a new document? Not now keeps them in {copy.path.parent} "
                "and asks again the next time this project opens.",
                OFFER_CHOICES,
            )
            if choice == OFFER_CHOICES[0]:
                try:
                    self.window.project.add_document(f"{copy.title} (recovered)", copy.text)
                except ProjectError as exc:
                    self.window.show_error("Could not add the recovered text", str(exc))
                    continue
            elif choice != OFFER_CHOICES[1] or not self.window.ask(
                "Discard the kept text",
                f"Delete the {words:,} words kept from “{copy.title}” for good? This cannot be "
                "undone.",
            ):
                continue
            with contextlib.suppress(OSError):
                copy.path.unlink()

    def _maybe_backup(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if not self._last_backup:
            self._last_backup = now
        elif now - self._last_backup >= BACKUP_EVERY_S:
            self.backup_now()

    def backup_now(self) -> None:
        if self.window.project is None:
            return
        self._last_backup = time.monotonic()
        try:
            made = self.window.project.backup()
        except ProjectError as exc:
            self.window.statusBar().showMessage(str(exc), 10000)
            return
        self.window.statusBar().showMessage(f"Backed up to {made.path}", 5000)

    def project_opened(self) -> None:
        """A project was opened: its backups count from its first save, and a synced or
        network folder is said."""
        self._last_backup = 0.0
        self.warn_about_location()

    def warn_about_location(self) -> None:
        warning = backups_mod.location_warning(self.window.project.path)
        if warning:
            self.window.statusBar().showMessage(warning, 20000)
            self.window.location_warning = warning

    def open_backups(self) -> None:
        if self.window.project is None:
            return
        dialog = BackupsDialog(self.window, self.window.project.path)
        self.window.open_dialogs.append(dialog)
        dialog.restored.connect(self.window.projects.open_project)
        dialog.open()


class BackupsDialog(QDialog):
    """The open project's backups, newest first; one can be restored as a new project."""

    restored = Signal(str)

    def __init__(self, window, project: Path):
        super().__init__(window)
        self.setWindowTitle("Backups")
        self.resize(620, 360)
        self.project = project
        self.found = backups_mod.list_backups(project)
        layout = QVBoxLayout(self)
        where = backups_mod.folder_for(project)
        layout.addWidget(QLabel(
            f"Backups of {project.name} (made on close and every {BACKUP_EVERY_S // 60} minutes "
            f"of writing), in {where}:"
        ))  # fmt: skip
        self.list = QListWidget()
        for b in self.found:
            self.list.addItem(f"{b.made:%Y-%m-%d %H:%M:%S} · {b.size / 1024:,.0f} KB")
        if not self.found:
            self.list.addItem("No backups yet")
        self.list.setCurrentRow(0)
        layout.addWidget(self.list)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.restore_button = buttons.addButton(
            "Restore as new project…", QDialogButtonBox.ButtonRole.ActionRole
        )
        self.restore_button.setEnabled(bool(self.found))
        self.restore_button.clicked.connect(self.restore_selected)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def ask_new_path(self, suggestion: str) -> str:
        path, _ = QFileDialog.getSaveFileName(
            self, "Restore as", suggestion, "SwiftWriter projects (*.swiftwriter)"
        )
        return path

    def restore_selected(self) -> str:
        row = self.list.currentRow()
        if not 0 <= row < len(self.found):
            return ""
        backup = self.found[row]
        suggestion = str(self.project.with_name(f"{self.project.stem} (restored).swiftwriter"))
        path = self.ask_new_path(suggestion)
        if not path:
            return ""
        if not path.endswith(".swiftwriter"):
            path += ".swiftwriter"
        try:
            backups_mod.restore(backup.path, Path(path))
        except ProjectError as exc:
            QMessageBox.warning(self, "Could not restore", str(exc))
            return ""
        self.accept()
        self.restored.emit(path)
        return path

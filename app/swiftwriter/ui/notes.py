"""The notes panel: a story bible beside the manuscript. A ticked (pinned) note goes into every
prompt ahead of the document, which is how the model learns names, places and style."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from swiftwriter.store import Project, ProjectError
from swiftwriter.ui.safekeeping import drop_emergency_copy, keep_emergency_copy

ID_ROLE = Qt.ItemDataRole.UserRole


class NotesPanel(QWidget):
    save_failed = Signal(str)  # a note's text could not be saved (and was copied aside)
    last_error = ""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.project: Project | None = None
        self.list = QListWidget()
        self.list.setToolTip("Tick a note to pin it to the prompt")
        self.text = QPlainTextEdit(placeholderText="Note text: characters, places, style…")
        self.text.setEnabled(False)
        self.add_button = QToolButton(text="+", toolTip="Add a note", autoRaise=True)
        remove = QToolButton(text="−", toolTip="Delete this note", autoRaise=True)
        self.add_button.clicked.connect(lambda: self.add_note())
        remove.clicked.connect(self.delete_current)
        bar = QHBoxLayout()
        bar.setContentsMargins(4, 2, 4, 2)
        bar.addWidget(self.add_button)
        bar.addWidget(remove)
        bar.addStretch(1)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.list)
        split.addWidget(self.text)
        split.setSizes([120, 200])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(split)
        self._loading = False
        self._save_timer = QTimer(self, singleShot=True, interval=800)
        self._save_timer.timeout.connect(self.save)
        self.list.currentItemChanged.connect(self._on_current)
        self.list.itemChanged.connect(self._on_item_changed)
        self.text.textChanged.connect(self._on_text)

    def set_project(self, project: Project | None) -> None:
        self.save()
        self.project = project
        self.reload(save_shown=False)  # the shown note is the old project's: saved above

    def reload(self, select: int | None = None, save_shown: bool = True) -> None:
        """Rebuild the list from the store. The shown note's text is saved first: the list and
        the text box are cleared, so a save still waiting for its delay would lose it."""
        if save_shown and not self._loading:
            self.save()
        chosen = None
        self._loading = True
        try:
            self.list.clear()
            self.text.clear()
            self.text.setEnabled(False)
            if self.project is None:
                return
            editable = not self.project.readonly
            for note in self.project.notes():
                item = QListWidgetItem(note.title)
                item.setData(ID_ROLE, note.id)
                flags = Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsEnabled
                if editable:
                    flags |= Qt.ItemFlag.ItemIsUserCheckable | Qt.ItemFlag.ItemIsEditable
                item.setFlags(flags)
                item.setCheckState(
                    Qt.CheckState.Checked if note.pinned else Qt.CheckState.Unchecked
                )
                self.list.addItem(item)
                if note.id == select:
                    chosen = item
            chosen = chosen or self.list.currentItem() or self.list.item(0)
            if chosen is not None:
                self.list.setCurrentItem(chosen)
        finally:
            self._loading = False
        # shown here, not by the selection's signal, which loading silences: a new note chosen
        # while loading kept its text box disabled, and what was typed at it went nowhere
        self._show(self.list.currentItem())

    def current_id(self) -> int | None:
        item = self.list.currentItem()
        return item.data(ID_ROLE) if item is not None else None

    def add_note(self, title: str = "New note", text: str = "", pinned: bool = False) -> int | None:
        if self.project is None or self.project.readonly:
            return None
        note = self.project.add_note(title, text, pinned=pinned)
        self.reload(select=note.id)
        return note.id

    def delete_current(self) -> None:
        note_id = self.current_id()
        if note_id is None or self.project is None or self.project.readonly:
            return
        self._save_timer.stop()
        self.project.delete_note(note_id)
        self.reload(save_shown=False)  # its text went with it

    def set_pinned(self, note_id: int, pinned: bool) -> None:
        if self.project is not None:
            self.project.update_note(note_id, pinned=pinned)
            self.reload(select=note_id)

    def save(self) -> bool:
        """Write the shown note's text (debounced while typing, and before every generation);
        False when it could not be saved: `last_error` says why, and the text is kept as an
        emergency copy in the data folder."""
        self._save_timer.stop()
        self.last_error = ""
        note_id = self.current_id()
        if note_id is None or self.project is None or self.project.readonly:
            return True
        text = self.text.toPlainText()
        try:
            if self.project.note(note_id).text != text:
                self.project.update_note(note_id, text=text)
        except ProjectError as exc:
            item = self.list.currentItem()
            return self._failed(note_id, item.text() if item else "a note", text, str(exc))
        drop_emergency_copy(self.project.path, f"note-{note_id}")
        return True

    def _failed(self, note_id: int, title: str, text: str, error: str) -> bool:
        try:
            where = keep_emergency_copy(self.project.path, f"note-{note_id}", title, text)
            self.last_error = f"The note could not be saved ({error}); a copy is in {where}."
        except OSError as exc:
            self.last_error = f"The note could not be saved ({error}), nor copied ({exc})."
        self.save_failed.emit(self.last_error)
        return False

    def _on_current(self, current, previous) -> None:
        if self._loading:
            return
        if previous is not None and self.project is not None:
            prev_id = previous.data(ID_ROLE)
            text = self.text.toPlainText()
            try:
                if self.project.note(prev_id).text != text:
                    self.project.update_note(prev_id, text=text)
            except ProjectError as exc:
                self._failed(prev_id, previous.text(), text, str(exc))
        self._show(current)

    def _show(self, current) -> None:
        """The note `current` in the text box, open to typing (none: the box empty and shut)."""
        self._save_timer.stop()
        self._loading = True
        try:
            if current is None or self.project is None:
                self.text.clear()
                self.text.setEnabled(False)
                return
            self.text.setPlainText(self.project.note(current.data(ID_ROLE)).text)
            self.text.setEnabled(True)
            self.text.setReadOnly(self.project.readonly)
        finally:
            self._loading = False

    def _on_item_changed(self, item: QListWidgetItem) -> None:
        if self._loading or self.project is None:
            return
        note_id = item.data(ID_ROLE)
        note = self.project.note(note_id)
        pinned = item.checkState() == Qt.CheckState.Checked
        title = item.text().strip()
        try:
            if pinned != note.pinned or (title and title != note.title):
                self.project.update_note(note_id, title=title or None, pinned=pinned)
        except ProjectError:
            pass
        if not title:  # an empty title is refused: show the old one again (after this signal)
            QTimer.singleShot(0, lambda: self.reload(select=note_id))

    def _on_text(self) -> None:
        if not self._loading:
            self._save_timer.start()

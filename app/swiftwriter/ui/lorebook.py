"""The lorebook window: entries for characters, places and things, each brought into the prompt
by its keys (or on every take, when pinned), the lorebook's budget, and the standing author's
note. Edits are saved as they are made (after a short pause, on switching entries, before a
take and on closing); the context viewer shows which entries fired and why."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from swiftwriter.errors import UserError
from swiftwriter.lorebook import BUDGET_RANGE, DEPTH_RANGE, SCAN_RANGE
from swiftwriter.store.lore import MAX_PRIORITY, check_keys
from swiftwriter.store.search import find_in_lore
from swiftwriter.store.worldinfo import import_world_info

ID_ROLE = Qt.ItemDataRole.UserRole


def _spin(low: int, high: int, suffix: str = "") -> QSpinBox:
    box = QSpinBox()
    box.setRange(low, high)
    box.setSuffix(suffix)
    box.setMaximumWidth(280)  # a number, not a line of text
    return box


def _label(entry) -> str:
    marks = [m for m, on in (("pinned", entry.pinned), ("off", not entry.enabled)) if on]
    return entry.title + (f"  ({', '.join(marks)})" if marks else "")


class LorebookDialog(QDialog):
    """Non-modal, one per window, closed with its project."""

    project_bound = True

    def __init__(self, main, select: int | None = None):
        super().__init__(main)
        self.main, self.project = main, main.project
        self.setWindowTitle("Lorebook")
        self.resize(780, 600)
        self._loading = False
        self._shown: int | None = None  # the entry in the form
        self._timer = QTimer(self, singleShot=True, interval=600)
        self._timer.timeout.connect(self.save)
        self._build()
        self._load_settings()
        for widget in (self.add_button, self.import_button, self.budget, self.scan, self.note,
                       self.depth):  # fmt: skip
            widget.setEnabled(not self.project.readonly)
        self.reload(select)

    # -- building ---------------------------------------------------------------------------
    def _build(self) -> None:
        self.filter = QLineEdit(placeholderText="Search titles, keys and text")
        self.add_button, self.delete_button = QPushButton("Add"), QPushButton("Delete")
        self.import_button = QPushButton("Import world info…")
        self.list = QListWidget()
        self.title, self.keys = QLineEdit(), QLineEdit(placeholderText="Elena, the keeper")
        self.priority = _spin(-MAX_PRIORITY, MAX_PRIORITY)
        self.pinned = QCheckBox("Pinned: in every prompt")
        self.enabled = QCheckBox("Enabled")
        self.content = QPlainTextEdit(placeholderText="What the model should know when it fires")
        self.budget = _spin(*BUDGET_RANGE, " tokens")
        self.scan = _spin(*SCAN_RANGE, " characters")
        self.note = QPlainTextEdit(placeholderText="A standing direction for every take")
        self.note.setMaximumHeight(64)
        self.depth = _spin(*DEPTH_RANGE, " paragraphs above the end")
        self.status = QLabel("")
        form = QFormLayout()
        form.addRow("Title", self.title)
        form.addRow("Keys", self.keys)
        form.addRow("Priority", self.priority)
        flags = QHBoxLayout()
        flags.addWidget(self.pinned)
        flags.addWidget(self.enabled)
        form.addRow("", flags)
        form.addRow("Text", self.content)
        editor = QWidget()
        editor.setLayout(form)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.list)
        split.addWidget(editor)
        split.setSizes([240, 520])
        bar = QHBoxLayout()
        for widget in (self.filter, self.add_button, self.delete_button, self.import_button):
            bar.addWidget(widget)
        below = QFormLayout()
        below.addRow("Entries may take", self.budget)
        below.addRow("Keys are searched in the last", self.scan)
        below.addRow("Author's note", self.note)
        below.addRow("Placed", self.depth)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(split, 1)
        layout.addLayout(below)
        layout.addWidget(self.status)
        layout.addWidget(buttons)
        self._connect()

    def _connect(self) -> None:
        self.filter.textChanged.connect(self._apply_filter)
        self.add_button.clicked.connect(lambda: self.add_entry())
        self.delete_button.clicked.connect(lambda: self.delete_current())
        self.import_button.clicked.connect(self._choose_import)
        self.list.currentItemChanged.connect(self._on_current)
        for signal in (self.title.textChanged, self.keys.textChanged, self.content.textChanged,
                       self.priority.valueChanged, self.pinned.toggled, self.enabled.toggled,
                       self.budget.valueChanged, self.scan.valueChanged, self.note.textChanged,
                       self.depth.valueChanged):  # fmt: skip
            signal.connect(self._edited)

    # -- showing ----------------------------------------------------------------------------
    def reload(self, select: int | None = None) -> None:
        """The list from the store (the shown entry saved first), `select` chosen."""
        self.save()
        self._loading = True
        try:
            self.list.clear()
            chosen = None
            for entry in self.project.lore_entries():
                item = QListWidgetItem(_label(entry))
                item.setData(ID_ROLE, entry.id)
                self.list.addItem(item)
                if entry.id == select:
                    chosen = item
            self.list.setCurrentItem(chosen or self.list.item(0))
        finally:
            self._loading = False
        self._apply_filter()
        self._show(self.current_id())

    def select(self, entry_id: int | None) -> None:
        for row in range(self.list.count()):
            if self.list.item(row).data(ID_ROLE) == entry_id:
                self.list.setCurrentRow(row)

    def current_id(self) -> int | None:
        item = self.list.currentItem()
        return item.data(ID_ROLE) if item is not None else None

    def _show(self, entry_id: int | None) -> None:
        self._loading = True
        try:
            entry = self.project.lore_entry(entry_id) if entry_id is not None else None
            self.title.setText(entry.title if entry else "")
            self.keys.setText(", ".join(entry.keys) if entry else "")
            self.priority.setValue(entry.priority if entry else 0)
            self.pinned.setChecked(bool(entry and entry.pinned))
            self.enabled.setChecked(bool(entry is None or entry.enabled))
            self.content.setPlainText(entry.content if entry else "")
            for widget in (self.title, self.keys, self.priority, self.pinned, self.enabled,
                           self.content, self.delete_button):  # fmt: skip
                widget.setEnabled(entry is not None and not self.project.readonly)
            self._shown = entry_id
        finally:
            self._loading = False

    def _load_settings(self) -> None:
        self._loading = True
        try:
            book, note = self.project.lorebook(), self.project.authors_note
            self.budget.setValue(book.budget)
            self.scan.setValue(book.scan)
            self.note.setPlainText(note.text)
            self.depth.setValue(note.depth)
        finally:
            self._loading = False

    def _apply_filter(self) -> None:
        needle = self.filter.text().strip()
        found = {m.lore_id for m in find_in_lore(self.project.lore_entries(), needle)}
        for row in range(self.list.count()):
            item = self.list.item(row)
            item.setHidden(bool(needle) and item.data(ID_ROLE) not in found)

    # -- changing ---------------------------------------------------------------------------
    def _edited(self) -> None:
        if not self._loading:
            self._timer.start()

    def _on_current(self, current, previous) -> None:
        if self._loading:
            return
        if not self.save() and previous is not None:  # refused: the form stays as typed
            self._loading = True
            self.list.setCurrentItem(previous)
            self._loading = False
            return
        self._show(current.data(ID_ROLE) if current is not None else None)

    def save(self) -> bool:
        """Write what the form shows that differs from the store; False (and the reason in the
        status line, the form kept as typed) when something was refused."""
        self._timer.stop()
        if self.project.readonly or self.project.db is None:
            return True
        try:
            self._save_entry()
            book, note = self.project.lorebook(), self.project.authors_note
            if (book.budget, book.scan) != (self.budget.value(), self.scan.value()):
                self.project.set_lorebook_limits(self.budget.value(), self.scan.value())
            if (note.text, note.depth) != (self.note.toPlainText().strip(), self.depth.value()):
                self.project.set_authors_note(self.note.toPlainText(), self.depth.value())
        except UserError as exc:
            self.status.setText(f"Not saved: {exc}")
            return False
        self.status.setText("")
        return True

    def _save_entry(self) -> None:
        if self._shown is None:
            return
        entry = self.project.lore_entry(self._shown)
        form = {"title": self.title.text().strip(), "keys": check_keys(self.keys.text()),
                "content": self.content.toPlainText(), "priority": self.priority.value(),
                "pinned": self.pinned.isChecked(), "enabled": self.enabled.isChecked()}  # fmt: skip
        if all(getattr(entry, k) == v for k, v in form.items()):
            return
        saved = self.project.update_lore_entry(self._shown, **form)
        for row in range(self.list.count()):
            if self.list.item(row).data(ID_ROLE) == saved.id:
                self.list.item(row).setText(_label(saved))

    def add_entry(self, title: str = "New entry") -> int | None:
        if self.project.readonly or not self.save():
            return None
        entry = self.project.add_lore_entry(title)
        self.reload(select=entry.id)
        self.title.setFocus()
        self.title.selectAll()
        return entry.id

    def delete_current(self) -> None:
        entry_id = self.current_id()
        if entry_id is None or self.project.readonly:
            return
        title = self.project.lore_entry(entry_id).title
        if not self.main.ask("Delete entry", f"Delete “{title}” from the lorebook?"):
            return
        self._timer.stop()
        self._shown = None  # its edits go with it
        self.project.delete_lore_entry(entry_id)
        self.reload()

    def _choose_import(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Import world info", "", "World info (*.json);;All files (*)"
        )
        if path:
            self.import_from(path)

    def import_from(self, path) -> int:
        """Add a KoboldAI or SillyTavern world-info file's entries (all or none); how many
        were added, the outcome in the status line."""

        if self.project.readonly or not self.save():
            return 0
        try:
            added, regex = import_world_info(self.project, path)
        except UserError as exc:
            self.status.setText(str(exc))
            return 0
        self.reload(select=added[0].id if added else None)
        left = f" ({regex} regular-expression keys left out)" if regex else ""
        self.status.setText(
            f"Imported {len(added)} {'entry' if len(added) == 1 else 'entries'}{left}"
        )
        return len(added)

    def done(self, result: int) -> None:  # noqa: D102 - what was typed is saved on closing
        self.save()
        super().done(result)

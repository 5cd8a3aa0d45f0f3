"""Word counts in the status bar: this document, the whole project and this session (words
added since the project was opened), each against its target where one is set, with a
progress bar; and the small dialog that sets the targets (Tools > Word targets…)."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QProgressBar,
    QSpinBox,
    QWidget,
)

from swiftwriter.store import planning
from swiftwriter.ui.fitting import ElidedLabel
from swiftwriter.words import count_words


class WordCounter(QWidget):
    """The other documents are counted when the project or the document changes; the open
    one live, from the editor's debounced count."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.label = ElidedLabel("")  # targets and the session make a long line
        self.bar = QProgressBar()
        self.bar.setMaximumWidth(120)
        self.bar.setTextVisible(True)
        self.bar.hide()
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.label)
        row.addWidget(self.bar)
        self.others = 0
        self.current = 0
        self.session_start: int | None = None

    def reload(self, new_session: bool = False) -> None:
        """Count the documents other than the open one (from the store)."""
        project, doc_id = self.window.project, self.window.doc_id
        if project is None:
            self.others, self.session_start = 0, None
            self.label.setText("")
            self.bar.hide()
            return
        self.current = count_words(self.window.editor.toPlainText()) if doc_id else 0
        self.others = sum(count_words(d.text) for d in project.documents() if d.id != doc_id)
        if new_session or self.session_start is None:
            self.session_start = self.others + self.current
        self.show_counts()

    def update_current(self, words: int) -> None:
        self.current = words
        self.show_counts()

    @property
    def total(self) -> int:
        return self.others + self.current

    def show_counts(self) -> None:
        project = self.window.project
        if project is None:
            return
        goal = planning.project_target(project)
        doc_goal = planning.document_targets(project).get(self.window.doc_id, 0)
        parts = []
        if self.window.doc_id is not None:
            parts.append(f"{self.current:,}" + (f" / {doc_goal:,}" if doc_goal else "") + " words")
        parts.append(f"project {self.total:,}" + (f" / {goal:,}" if goal else ""))
        parts.append(f"session {self.total - (self.session_start or 0):+,}")
        self.label.setText(" · ".join(parts))
        shown, done = (goal, self.total) if goal else (doc_goal, self.current)
        self.bar.setVisible(bool(shown))
        if shown:
            self.bar.setMaximum(shown)
            self.bar.setValue(min(done, shown))
            self.bar.setFormat(f"{round(100 * done / shown)}%")
            self.bar.setToolTip("Project target" if goal else "Document target")


class TargetsDialog(QDialog):
    """Word targets for the open document and the whole project (0: none)."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        project = window.project
        self.setWindowTitle("Word targets")
        self.document = QSpinBox()
        self.project = QSpinBox()
        for box in (self.document, self.project):
            box.setRange(0, planning.MAX_TARGET)
            box.setSingleStep(500)
            box.setSpecialValueText("none")
            box.setSuffix(" words")
        self.document.setValue(planning.document_targets(project).get(window.doc_id, 0))
        self.document.setEnabled(window.doc_id is not None)
        self.project.setValue(planning.project_target(project))
        form = QFormLayout(self)
        form.addRow("This document", self.document)
        form.addRow("Whole project", self.project)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def accept(self) -> None:
        project, doc_id = self.window.project, self.window.doc_id
        planning.set_project_target(project, self.project.value())
        if doc_id is not None:
            planning.set_document_target(project, doc_id, self.document.value())
        self.window.word_counter.show_counts()
        super().accept()

"""The context viewer (exactly what the model is given for the next take, part by part, with
token counts, and the document's rolling summary to edit), the project's memory (what this book is) and a document's synopsis (by hand, or
summarised by the model in the background), for the main window."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QListWidget,
    QPlainTextEdit,
    QVBoxLayout,
)

from swiftwriter.ui.stoppable import StoppableWorker, start_worker
from swiftwriter.ui.takes import take_request
from swiftwriter.writing.synopsis import write_synopsis
from swiftwriter.writing.take import Take


def next_take(window) -> Take:
    """The take Generate would run now (not started), from the very request it would make:
    its session's story context is what the viewer shows."""
    return Take(take_request(window))


class ContextDialog(QDialog):
    """Read-only: the parts of the next take's prompt, marked, with token counts, and the
    lorebook entries that fired, each with why (`lore`: a lorebook.LoreChoice, or None for a
    project without a lorebook). With `project` and `doc_id`: the document's rolling summary,
    editable, and the project's switch for it; saved, the view is `rebuild()` (the context
    rendered again)."""

    def __init__(self, window, text: str, lore=None, project=None, doc_id=None, rebuild=None):
        super().__init__(window)
        self.setWindowTitle("What the model is given")
        self.resize(760, 560)
        layout = QVBoxLayout(self)
        self.fired = QListWidget()
        if lore is not None:
            layout.addWidget(QLabel("Lorebook entries that fired, and why:"))
            for fired in lore.fired:
                self.fired.addItem(fired.describe())
            for fired in lore.left_out:
                self.fired.addItem(f"{fired.describe()}: left out, past the budget")
            if not lore.fired and not lore.left_out:
                self.fired.addItem("None: no entry is pinned, and no key is in the text searched")
            self.fired.setMaximumHeight(110)
            layout.addWidget(self.fired)
        layout.addWidget(QLabel(
            "The next take's context, part by part (memory and pinned notes, lorebook, earlier "
            "documents, this document before the cursor, the direction), as the model receives it:"
        ))  # fmt: skip
        self.view = QPlainTextEdit(text)
        self.view.setReadOnly(True)
        self.view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        layout.addWidget(self.view)
        self.project, self.doc_id, self.rebuild = project, doc_id, rebuild
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        self.summary = self.rolling = self.save_summary_button = None
        if project is not None and doc_id is not None:
            self._summary_field(layout, buttons)
        layout.addWidget(buttons)

    def _summary_field(self, layout, buttons) -> None:
        """The document's rolling summary, editable, and whether the model keeps it."""
        project = self.project
        summary = project.summary(self.doc_id)
        who = {"model": "last written by the model", "writer": "last edited by you"}
        layout.addWidget(QLabel(
            "Rolling summary of this document: what slid out of long takes' window, summarised "
            "by the model after each such take (" + (who[summary.source] if summary.text else
            "none yet") + "). Every take of this document reads it; edit it here:",
            wordWrap=True,
        ))  # fmt: skip
        self.summary = QPlainTextEdit(summary.text)
        self.summary.setReadOnly(project.readonly)
        self.summary.setMaximumHeight(120)
        layout.addWidget(self.summary)
        self.rolling = QCheckBox("Summarise what slides out of a long take's window")
        self.rolling.setChecked(project.rolling_summary)
        self.rolling.setEnabled(not project.readonly)
        layout.addWidget(self.rolling)
        self.summary_status = QLabel("")
        layout.addWidget(self.summary_status)
        self.save_summary_button = buttons.addButton(
            "Save summary", QDialogButtonBox.ButtonRole.ActionRole
        )
        self.save_summary_button.setEnabled(not project.readonly)
        self.save_summary_button.clicked.connect(self.save_summary)

    def save_summary(self) -> None:
        """The edited summary and the switch into the project; the view shows the context anew."""
        if self.project.readonly:
            return
        text = self.summary.toPlainText().strip()
        if text != self.project.summary(self.doc_id).text:  # the switch alone keeps who wrote it
            self.project.set_summary(self.doc_id, text)
        self.project.set_rolling_summary(self.rolling.isChecked())
        if self.rebuild is not None:
            self.view.setPlainText(self.rebuild())
        self.summary_status.setText("Saved: the next take reads it")


class TextFieldDialog(QDialog):
    """A titled explanation, one editable text of the project, Save and Cancel (and room for a
    status line and more buttons)."""

    def __init__(self, window, project, title: str, explanation: str, text: str):
        super().__init__(window)
        self.project = project
        self.setWindowTitle(title)
        self.resize(560, 360)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(explanation, wordWrap=True))
        self.text = QPlainTextEdit(text)
        self.text.setReadOnly(project.readonly)
        layout.addWidget(self.text)
        self.status = QLabel("")
        layout.addWidget(self.status)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)

    def store(self, text: str) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def save(self) -> None:
        if not self.project.readonly:
            self.store(self.text.toPlainText().strip())
        self.accept()


class MemoryDialog(TextFieldDialog):
    """The project's memory: premise, style, characters; the first part of every prompt."""

    def __init__(self, window, project):
        super().__init__(
            window,
            project,
            "Project memory",
            "What this book is: premise, style, characters. The model reads it before the text "
            "on every take (pinned notes follow it).",
            project.memory,
        )

    def store(self, text: str) -> None:
        self.project.set_memory(text)


class SummaryWorker(StoppableWorker):
    """The model writes a synopsis off the GUI thread (never into the document)."""

    written = Signal(str)
    what = "summary"

    def __init__(self, loaded, text: str):
        super().__init__()
        self.loaded, self.text = loaded, text

    def _run(self) -> None:

        summary = write_synopsis(self.loaded, self.text, should_stop=self.should_stop)
        if not self.should_stop():
            self.written.emit(summary)


class SynopsisDialog(TextFieldDialog):
    """A document's synopsis: written by hand, or summarised by the model in the background.
    The story context uses it where the document's text does not fit."""

    def __init__(self, window, project, doc_id: int):
        doc = project.document(doc_id)
        super().__init__(
            window,
            project,
            f"Synopsis of “{doc.title}”",
            "A few sentences on what happens here. Later documents' prompts use it instead of "
            "the text when the whole text does not fit.",
            doc.synopsis,
        )
        self.window_, self.doc_id = window, doc_id
        self.summarise_button = self.buttons.addButton(
            "Summarise with the model", QDialogButtonBox.ButtonRole.ActionRole
        )
        self.summarise_button.setEnabled(window.loaded_model is not None and not project.readonly)
        self.summarise_button.clicked.connect(self.summarise)
        self.thread = None

    def store(self, text: str) -> None:
        self.project.set_synopsis(self.doc_id, text)

    def summarise(self) -> None:
        if self.thread is not None:
            return
        worker = SummaryWorker(self.window_.loaded_model, self.project.document(self.doc_id).text)
        self.thread = start_worker(self, worker)
        worker.written.connect(self.text.setPlainText)
        worker.failed.connect(self.status.setText)
        self.thread.finished.connect(self._ended)
        self.summarise_button.setEnabled(False)
        self.status.setText("The model is summarising…")
        self.worker = worker
        self.thread.start()

    def _ended(self) -> None:
        if self.status.text() == "The model is summarising…":
            self.status.setText("Summary written: edit it, then Save")
        self.thread.deleteLater()
        self.thread = None
        self.summarise_button.setEnabled(True)

    def done(self, result: int) -> None:  # noqa: D102 - wait for a summary in progress
        if self.thread is not None:
            self.worker.stop()
            self.thread.wait(30000)
        super().done(result)

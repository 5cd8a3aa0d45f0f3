"""Selection tools in the window: Rewrite, Describe, Expand, Shorten or the writer's own
instruction on the selected passage. The model writes the alternatives together in a worker
thread (writing/alternatives.py), they stream side by side into a chooser, and the one the writer
picks replaces the passage as one edit (one Ctrl+Z takes it back), recorded in History with
the snapshot before it."""

from __future__ import annotations

import hashlib

from PySide6.QtCore import QObject, QThread, Signal
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import (
    QDialog,
    QGroupBox,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
)

from swiftwriter.ui.editor import text_before
from swiftwriter.ui.stoppable import StoppableWorker, start_worker
from swiftwriter.ui.worker import TextBatcher
from swiftwriter.writing.alternatives import COUNT, TOOLS, write_alternatives
from swiftwriter.writing.history import tokenizer_identity


class AlternativesWorker(StoppableWorker):
    """Writes the alternatives off the GUI thread; pieces and the result go back by signal."""

    piece = Signal(int, str)
    done = Signal(object)  # alternatives.AlternativesResult
    what = "rewrite"

    def __init__(self, loaded, tool: str, passage: str, before: str, instruction: str, panel):
        super().__init__()
        self.loaded, self.tool, self.passage = loaded, tool, passage
        self.before, self.instruction = before, instruction
        self.sampling, self.drafting = panel  # the generation panel's mode and strategy

    def _run(self) -> None:

        batchers = [TextBatcher(lambda text, i=i: self.piece.emit(i, text)) for i in range(COUNT)]
        try:
            result = write_alternatives(
                self.loaded, self.tool, self.passage, before=self.before,
                instruction=self.instruction, count=COUNT, sampling=self.sampling,
                drafting=self.drafting, should_stop=self.should_stop,
                on_text=lambda i, piece: batchers[i].add(piece),
            )  # fmt: skip
        finally:
            for batcher in batchers:
                batcher.flush()
        self.done.emit(result)


class AlternativesDialog(QDialog):
    """The alternatives side by side as they are written; "Use this" under each once done."""

    chosen = Signal(int)
    stop_requested = Signal()

    def __init__(self, parent, title: str, passage: str):
        super().__init__(parent)
        self.setWindowTitle(title)
        self.resize(1100, 560)
        self.panes: list[QPlainTextEdit] = []
        self.use_buttons: list[QPushButton] = []
        row = QHBoxLayout()
        for i in range(COUNT):
            box = QGroupBox(f"Alternative {i + 1}")
            inner = QVBoxLayout(box)
            pane = QPlainTextEdit(readOnly=True)
            use = QPushButton("Use this")
            use.setEnabled(False)
            use.clicked.connect(lambda _=False, i=i: self._choose(i))
            inner.addWidget(pane, 1)
            inner.addWidget(use)
            row.addWidget(box, 1)
            self.panes.append(pane)
            self.use_buttons.append(use)
        original = QLabel(f"Passage: {passage[:300]}{'…' if len(passage) > 300 else ''}")
        original.setWordWrap(True)
        self.status = QLabel("Writing the alternatives together…")
        self.stop_button = QPushButton("Stop")
        self.stop_button.clicked.connect(self.stop_requested.emit)
        keep = QPushButton("Keep the passage")
        keep.clicked.connect(self.reject)
        buttons = QHBoxLayout()
        buttons.addWidget(self.status, 1)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(keep)
        layout = QVBoxLayout(self)
        layout.addWidget(original)
        layout.addLayout(row, 1)
        layout.addLayout(buttons)

    def add_piece(self, index: int, text: str) -> None:
        pane = self.panes[index]
        cursor = pane.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(text)

    def finish(self, texts: list[str], line: str) -> None:
        for pane, use, text in zip(self.panes, self.use_buttons, texts, strict=True):
            pane.setPlainText(text)
            use.setEnabled(bool(text))
        self.status.setText(line)
        self.stop_button.setEnabled(False)

    def _choose(self, index: int) -> None:
        self.chosen.emit(index)
        self.accept()


class SelectionTools(QObject):
    """The tools' menu, one run at a time, and the chosen text put in place of the passage."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.thread: QThread | None = None
        self.worker: AlternativesWorker | None = None
        self.dialog: AlternativesDialog | None = None
        self.span: QTextCursor | None = None  # the passage in the editor (follows edits)
        self.passage = ""
        self.request: dict = {}
        self.result = None
        self.menu = QMenu("Rewrite selection", window)
        for tool, (label, _words, _factor) in TOOLS.items():
            text = f"{label}…" if tool == "custom" else label
            self.menu.addAction(text, lambda t=tool: self.start(t))

    @property
    def busy(self) -> bool:
        return self.thread is not None

    def start(self, tool: str, instruction: str | None = None) -> AlternativesDialog | None:
        """Alternatives of the editor's selection (the custom tool asks for its instruction
        unless given); refused with a line in the status bar when nothing is selected, no
        model is loaded, or the model is busy."""
        window, editor = self.window, self.window.editor
        why = self._refusal(editor.textCursor())
        if why:
            window.statusBar().showMessage(why, 8000)
            return None
        if tool == "custom" and instruction is None:
            instruction, ok = QInputDialog.getText(
                window, "Your instruction", "What should the model do with the passage?"
            )
            if not ok or not instruction.strip():
                return None
        cursor = editor.textCursor()
        self.span = QTextCursor(cursor)
        self.passage = editor.span_text(cursor)
        before = text_before(editor.toPlainText(), cursor.selectionStart())
        self.request = {"tool": tool, "instruction": instruction or ""}
        panel = window.panel
        worker = AlternativesWorker(window.loaded_model, tool, self.passage, before,
                                    instruction or "", (panel.sampling(), panel.drafting()))  # fmt: skip
        self.dialog = AlternativesDialog(window, f"{TOOLS[tool][0]}: three alternatives",
                                         self.passage)  # fmt: skip
        self.dialog.chosen.connect(self.use)
        self.dialog.stop_requested.connect(worker.stop)
        self.dialog.rejected.connect(worker.stop)
        self.thread = start_worker(self, worker)
        self.worker = worker
        worker.piece.connect(self.dialog.add_piece)
        worker.done.connect(self._done)
        worker.failed.connect(self._failed)
        self.thread.finished.connect(self._ended)
        self.thread.start()
        self.dialog.open()
        return self.dialog

    def _refusal(self, cursor: QTextCursor) -> str:
        window = self.window
        if window.loaded_model is None:
            return "Load a model first: the alternatives are the model's"
        if self.busy or window.takes.busy:
            return "The model is writing: wait for it, or stop it"
        if not cursor.hasSelection() or not window.editor.span_text(cursor).strip():
            return "Select a passage first: the tools rewrite the selection"
        return ""

    def _done(self, result) -> None:
        self.result = result
        seconds = max(result.seconds, 1e-9)
        tokens = sum(len(alt.token_ids) for alt in result.alternatives)
        line = (
            f"{len(result.alternatives)} alternatives, {tokens:,} tokens written together in "
            f"{result.seconds:.1f} s ({tokens / seconds:.1f} tok/s)"
        )
        if result.status == "cancelled":
            line = "Stopped: " + line
        if self.dialog is not None:
            self.dialog.finish([alt.text for alt in result.alternatives], line)

    def _failed(self, message: str) -> None:
        if self.dialog is not None:
            self.dialog.status.setText(message)
        self.window.show_error("Rewrite", message)

    def _ended(self) -> None:
        self.thread = self.worker = None

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.stop()

    def wait(self, ms: int = 20000) -> None:
        if self.thread is not None:
            self.thread.wait(ms)

    def use(self, index: int) -> bool:
        """Put alternative `index` in place of the passage: one edit, recorded in History."""
        window, editor, result = self.window, self.window.editor, self.result
        if result is None or self.span is None:
            return False
        alt = result.alternatives[index]
        if editor.span_text(self.span) != self.passage:
            window.show_error("Rewrite", "The passage changed while the alternatives were "
                              "written: select it again and ask once more")  # fmt: skip
            return False
        self._record(index)
        editor.replace_span(self.span, alt.text)
        window.safekeeping.save_now()
        window.statusBar().showMessage(
            f"Alternative {index + 1} of {len(result.alternatives)} is in place of the passage "
            "(Ctrl+Z takes the passage back)", 10000
        )  # fmt: skip
        return True

    def _record(self, index: int) -> None:
        """The chosen alternative as a generation of the document, after a snapshot of the
        document with the passage (History restores it)."""
        window, result = self.window, self.result
        project, doc_id = window.project, window.doc_id
        if project is None or doc_id is None or project.readonly:
            return

        window.safekeeping.save_now()
        alt, loaded = result.alternatives[index], window.loaded_model
        key = f"{result.tool}\n{result.instruction}\n{self.passage}".encode()
        settings = {
            "tool": result.tool, "instruction": result.instruction, "replaced": self.passage,
            "seed": alt.seed, "chosen": index + 1, "alternatives": len(result.alternatives),
            "sampling": result.sampling,
        }  # fmt: skip
        record = project.start_generation(
            doc_id, hashlib.sha256(key).hexdigest()[:16], loaded.entry.id,
            tokenizer_identity(loaded.tokenizer), settings, flush_interval=0,
        )  # fmt: skip
        record.append(alt.text, alt.token_ids)
        record.finish("finished", {**result.stats[index], "seconds_together": result.seconds})

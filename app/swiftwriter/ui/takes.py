"""Generate, Stop, Continue, Regenerate, Undo generation and takes: the glue between the window
(editor, panel, stats dock) and one worker thread at a time. `take_request` is the one request
the window makes for a take: the take runs it, and the context viewer shows its prompt.

The editor is the truth for the open document: the session appends the finished text to the
end of the stored document, then the window saves the editor's text over it, which puts the
take where the cursor was. Regenerate removes the last take from the text (the store keeps it
as a generation) and writes another at the same spot; the takes menu swaps between them."""

from __future__ import annotations

from dataclasses import dataclass, replace

from PySide6.QtCore import QObject, QThread, Signal

from swiftwriter.errors import UserError
from swiftwriter.ui.editor import qt_len, text_before
from swiftwriter.ui.panel_state import save_project_state, state_of
from swiftwriter.ui.stats_dock import STOP_REASONS
from swiftwriter.ui.worker import GenerationWorker, start_generation
from swiftwriter.writing.endings import parse_stops
from swiftwriter.writing.take import TakeRequest


@dataclass
class TakeMenuEntry:
    """One of the takes at the last spot, as the takes menu offers it."""

    generation_id: int | None
    text: str
    status: str


def take_request(window) -> TakeRequest:
    """The request for the next take from the window: the text before the cursor and the
    panel's settings. The take runs it; the context viewer shows the prompt it makes."""
    panel, editor = window.panel, window.editor
    target, unit = panel.target()
    direction, story_mode = panel.story()
    return TakeRequest(
        project=window.project,
        doc_id=window.doc_id,
        loaded=window.loaded_model,
        prompt_text=text_before(editor.toPlainText(), editor.textCursor().position()),
        target=target,
        unit=unit,
        sampling=panel.sampling(),
        drafting=panel.drafting(),
        context=panel.context(),
        history=(
            window.histories.for_model(window.loaded_model)
            if panel.use_history() and window.histories is not None
            else None
        ),
        keep_writing=panel.keep_writing.isChecked(),
        keep_to_story=panel.story_only.isChecked(),
        direction=direction,
        story_mode=story_mode,
    )


class TakeController(QObject):
    started = Signal()
    finished = Signal(dict)
    failed = Signal(str)
    busy_changed = Signal(bool)

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.thread: QThread | None = None
        self.worker: GenerationWorker | None = None
        self.takes: list[TakeMenuEntry] = []
        self.current = -1  # the take shown now
        self.span = None  # the editor span of the last spot (QTextCursor)
        self._regenerating = False
        self.measure_baseline = True
        self.flush_interval = 1.0

    @property
    def busy(self) -> bool:
        return self.thread is not None

    def reset(self) -> None:
        """A different document is shown: takes and spans belong to the old one."""
        self.takes = []
        self.current = -1
        self.span = None
        self.window.panel.set_takes([], 0)

    # -- starting ---------------------------------------------------------------------------
    def can_generate(self) -> str:
        """Why a generation cannot start now ('' when it can)."""
        w = self.window
        if self.busy:
            return "A generation is already running"
        if w.project is None or w.doc_id is None:
            return "Open a project and choose a document first"
        if w.project.readonly:
            return f"This project is read-only here ({w.project.readonly_reason})"
        if w.loaded_model is None:
            return "The model is not loaded yet"
        if getattr(w, "model_training", False):
            return "Drafting heads are training on this model: wait, or cancel it in Models…"
        return ""

    def write_takes(self, count: int = 3) -> bool:
        """Several takes at the cursor written together (one model pass per step for all):
        the first streams into the text, the others wait in the takes box."""
        if self.window.panel.precise.isChecked():
            self.window.statusBar().showMessage(
                "Precise writes one text: choose Creative for different takes", 8000
            )
            return False
        return self.generate(takes=count)

    def generate(self, at_end: bool = False, takes: int = 1) -> bool:
        why = self.can_generate()
        if why:
            self.window.statusBar().showMessage(why, 5000)
            return False
        w = self.window
        editor = w.editor
        if at_end:
            cursor = editor.textCursor()
            cursor.movePosition(cursor.MoveOperation.End)
            editor.setTextCursor(cursor)
        if not self._regenerating:
            self.takes = []
        w.safekeeping.save_now()  # autosave before every generation (the store snapshots it, too)
        w.notes.save()
        w.tools.save_lorebook()
        stops = w.panel.stop_sequences()
        try:
            parse_stops(stops)
            if stops != w.project.stop_sequences:
                w.project.set_stop_sequences(stops)
            save_project_state(w.project, state_of(w.panel))  # settings stick with the book
        except UserError as exc:
            w.show_error("Cannot generate", str(exc))
            return False
        position = editor.textCursor().position()
        job = replace(
            take_request(w),
            measure_baseline=self.measure_baseline,
            flush_interval=self.flush_interval,
            takes=takes,
        )
        self.span = editor.begin_stream(position)
        w.stats_dock.reset()
        self.thread, self.worker = start_generation(self, job)
        self.worker.text.connect(editor.append_stream)
        self.worker.stats.connect(w.stats_dock.update_stats)
        self.worker.baseline.connect(w.stats_dock.show_baseline)
        self.worker.done.connect(self._on_done)
        self.worker.failed.connect(self._on_failed)
        self.thread.finished.connect(self._on_thread_finished)
        self.busy_changed.emit(True)
        self.started.emit()
        self.thread.start()
        w.statusBar().showMessage("Generating… (Esc stops)")
        return True

    def continue_(self) -> bool:
        return self.generate(at_end=True)

    def regenerate(self) -> bool:
        """Another take at the last spot; the previous one stays among the takes."""
        if self.busy or self.span is None or not self.takes:
            return self.generate()
        editor = self.window.editor
        start = self.span.selectionStart()
        editor.replace_span(self.span, "")
        cursor = editor.textCursor()
        cursor.setPosition(start)
        editor.setTextCursor(cursor)
        self._regenerating = True
        try:
            started = self.generate()
        finally:
            self._regenerating = False
        if started and self.window.panel.precise.isChecked():
            self.window.statusBar().showMessage(
                "Precise writes the same take again; choose Creative for a different one", 8000
            )
        return started

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.window.statusBar().showMessage("Stopping after this step…")

    def wait(self, ms: int = 30000) -> bool:
        if self.thread is None:
            return True
        return self.thread.wait(ms)

    # -- after ------------------------------------------------------------------------------
    def _on_done(self, result: dict) -> None:
        w = self.window
        span = w.editor.end_stream()
        self.span = span
        text = w.editor.span_text(span)
        if result.get("generation_id") is not None or text:
            entry = TakeMenuEntry(result.get("generation_id"), text, result.get("status", ""))
            self.takes.append(entry)
        self.current = len(self.takes) - 1
        for other in result.get("others", []):  # written together with it: in the box
            self.takes.append(TakeMenuEntry(other["generation_id"], other["text"], other["status"]))
        self._show_takes()
        w.safekeeping.save_now(force=True)
        w.stats_dock.show_summary(result)
        stats = result.get("stats", {})
        why = STOP_REASONS.get(stats.get("stop_reason", ""), "")
        w.statusBar().showMessage(
            f"Generation {result.get('status', 'finished')}: {stats.get('tokens', 0):,} tokens"
            + (f" ({why})" if why else "")
            + (f". {result['summary_line']}" if result.get("summary_line") else ""),
            10000,
        )
        self.finished.emit(result)

    def _on_failed(self, message: str) -> None:
        w = self.window
        self.span = w.editor.end_stream()
        w.safekeeping.save_now(force=True)
        w.show_error("Generation failed", message)
        self.failed.emit(message)

    def _on_thread_finished(self) -> None:
        thread, self.thread, self.worker = self.thread, None, None
        if thread is not None:
            thread.deleteLater()
        self.busy_changed.emit(False)

    def _show_takes(self) -> None:
        labels = [
            f"Take {i + 1}" + (f" · generation {t.generation_id}" if t.generation_id else "")
            for i, t in enumerate(self.takes)
        ]
        self.window.panel.set_takes(labels, self.current)

    # -- undo and takes ---------------------------------------------------------------------
    def undo_generation(self) -> bool:
        """Remove the last take's text in one undo step (Ctrl+Z brings it back)."""
        if self.busy or self.span is None or not self._reselect():
            return False
        self.window.editor.replace_span(self.span, "")
        self.window.safekeeping.save_now(force=True)
        self.window.statusBar().showMessage("Generation removed (it stays in the history)", 5000)
        return True

    def _reselect(self) -> bool:
        """Find the current take again after an undo and redo collapsed its span."""
        span = self.span
        if span.hasSelection():
            return True
        text = self.takes[self.current].text if 0 <= self.current < len(self.takes) else ""
        if not text:
            return False
        pos, size = span.position(), qt_len(text)
        full = self.window.editor.toPlainText().encode("utf-16-le")  # Qt positions
        wanted = text.encode("utf-16-le")
        for start in (pos, pos - size):  # a redo leaves the cursor before or after it
            if start >= 0 and full[2 * start : 2 * (start + size)] == wanted:
                span.setPosition(start)
                span.setPosition(start + size, span.MoveMode.KeepAnchor)
                return True
        return False

    def choose_take(self, index: int) -> None:
        if self.busy or self.span is None or not 0 <= index < len(self.takes):
            return
        self.window.editor.replace_span(self.span, self.takes[index].text)
        self.current = index
        self.window.safekeeping.save_now(force=True)

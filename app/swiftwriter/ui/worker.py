"""One take off the GUI thread: take.Take run inside a QThread.

The worker never touches a widget and does no session work; it passes the take's text pieces
(batched), live snapshots, measured baseline and result to the GUI thread through queued
signals, and stops between two engine steps when asked. Any exception becomes a `failed`
message: the app never crashes on a generation."""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, QThread, Signal

from swiftwriter.ui.stoppable import StoppableWorker, start_worker
from swiftwriter.writing.take import Take, TakeRequest

TEXT_INTERVAL_S = 0.04  # streamed text reaches the editor at most 25 times a second


class TextBatcher:
    """Joins streamed pieces and passes them on at most every TEXT_INTERVAL_S: a fast engine
    writes hundreds of pieces a second, and one editor insert per piece would queue up faster
    than the GUI thread can take them (the window would stall behind its own backlog)."""

    def __init__(self, emit):
        self.emit = emit
        self.pieces: list[str] = []
        self.last = 0.0

    def add(self, piece: str) -> None:
        self.pieces.append(piece)
        now = time.perf_counter()
        if now - self.last >= TEXT_INTERVAL_S:
            self.last = now
            self.flush()

    def flush(self) -> None:
        if self.pieces:
            text, self.pieces = "".join(self.pieces), []
            self.emit(text)


class GenerationWorker(StoppableWorker):
    """Runs one take (take.Take) and moves its text, snapshots and result to the GUI thread."""

    text = Signal(str)
    stats = Signal(object)  # take.LiveStats
    baseline = Signal(dict)
    done = Signal(dict)
    what = "generation"

    def __init__(self, job: TakeRequest):
        super().__init__()
        self.job = job

    def _run(self) -> None:
        text = TextBatcher(self.text.emit)
        take = Take(self.job, on_text=text.add, on_stats=self.stats.emit,
                    on_baseline=self.baseline.emit)  # fmt: skip
        try:
            outcome = take.run(self.should_stop)
        finally:
            text.flush()  # the last pieces reach the editor before `done`
        result = outcome.result
        self.done.emit(
            {
                "status": outcome.status,
                "generation_id": result.generation.id if result else None,
                "text": result.text if result else "",
                "stats": outcome.stats,
                "target": outcome.target,
                "summary_line": outcome.summary_line,  # what the rolling summary did after it
                # takes written together with it ("Write 3 takes"), stored beside it
                "others": [
                    {"generation_id": g.id, "text": g.text, "status": g.status}
                    for g in (result.others if result else [])
                ],
            }
        )


def start_generation(parent: QObject, job: TakeRequest) -> tuple[QThread, GenerationWorker]:
    """Start a worker in its own QThread; the caller connects the signals it needs first-hand
    (the signals are queued to the GUI thread because the worker lives in the other thread)."""
    worker = GenerationWorker(job)
    return start_worker(parent, worker), worker

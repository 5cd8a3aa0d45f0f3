"""Training drafting heads from the app: a small dialog and a worker thread around the same
pipeline as `swiftwriter heads train` (training/pipeline.py).

The drafter goes into the data folder (`heads/<model id>`), where the loader looks first. Text
the model wrote, teacher features and checkpoints stay there, so Cancel loses nothing: training
again with the same kind resumes. The worker never touches a widget; it speaks through queued
signals, and any exception becomes a message."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
)

from swiftwriter import application, paths
from swiftwriter.errors import UserError
from swiftwriter.ui.stoppable import StoppableWorker, start_worker

KINDS = {
    "Recurrent (one small block, drafts step by step)": "recurrent",
    "Linear (TokenSwift's heads)": "linear",
}
STAGES = {
    "loading": "Loading the model",
    "writing": "The model writes training text",
    "features": "Reading it with the model",
    "training": "Training",
}
PROGRESS_INTERVAL_S = 0.1
DEFAULT_TOKENS = 200_000


def heads_folder(model_id: str) -> Path:
    """Where the app trains a model's drafter: the loader's first place to look."""
    return paths.data_dir() / "heads" / model_id


def text_rows(encode, files: list[str], length: int):
    """The training files as rows of `length` token ids (any tokenizer's encode)."""
    import torch  # lazy: torch

    from swiftwriter.export.importers import read_text  # lazy: docx

    ids: list[int] = []
    for path in files:
        file = Path(path).expanduser()
        if not file.is_file():
            raise UserError(f"No such file: {file}")
        ids.extend(encode(read_text(file)))
    n = len(ids) // length
    if n < 2:
        raise UserError(
            f"The training files hold {len(ids):,} tokens: give at least {2 * length:,} "
            "(or let the model write some)"
        )
    return torch.tensor(ids[: n * length], dtype=torch.int32).view(n, length)


@dataclass
class TrainJob:
    entry: object  # the registry's ModelEntry
    out_dir: Path
    kind: str = "recurrent"
    steps: int = 1500
    self_distill: int = DEFAULT_TOKENS
    text_files: list[str] = field(default_factory=list)
    loaded: object = None  # the app's LoadedModel when it is this model; else loaded here
    device: str = "auto"
    row_length: int = 768
    batch: int = 512


class HeadsTrainer(StoppableWorker):
    """Runs in a QThread: loads the model if needed, then trains with progress and a stop flag."""

    progress = Signal(str, int, int, object)  # stage, done, total, loss (float or None)
    done = Signal(dict)  # {"folder", "validation", "kind"}
    stopped = Signal(str)
    what = "training"

    def __init__(self, job: TrainJob):
        super().__init__()
        self.job = job
        self._last = ("", 0.0)

    def _run(self) -> None:
        from swiftwriter.writing.history import encoder_of  # lazy: torch, only to train

        job = self.job
        loaded = job.loaded
        if loaded is None:
            self.progress.emit("loading", 0, 0, None)
            loaded = application.load_for_training(job.entry, job.device)
        rows = None
        if job.text_files:
            rows = text_rows(encoder_of(loaded.tokenizer), job.text_files, job.row_length)
        bundle = application.train_drafter(
            loaded,
            job.entry,
            job.out_dir,
            job.kind,
            job.steps,
            job.batch,
            given_rows=rows,
            self_distill=job.self_distill,
            row_length=job.row_length,
            on_progress=self._on_progress,
            should_stop=self.should_stop,
        )
        if bundle is None:
            self.stopped.emit(
                "Stopped. What was done is kept: train again with the same kind to resume."
            )
            return
        self.done.emit(
            {
                "folder": str(job.out_dir),
                "kind": bundle.kind,
                "validation": bundle.card.get("validation", {}),
            }
        )

    def _on_progress(self, stage: str, done: int, total: int, loss=None) -> None:
        now = time.perf_counter()
        last_stage, last_t = self._last
        if stage == last_stage and done < total and now - last_t < PROGRESS_INTERVAL_S:
            return
        self._last = (stage, now)
        self.progress.emit(stage, int(done), int(total), None if loss is None else float(loss))


def start_training(parent: QObject, job: TrainJob) -> tuple[QThread, HeadsTrainer]:
    """The trainer in its own thread, not started (the dialog connects its slots first)."""
    worker = HeadsTrainer(job)
    return start_worker(parent, worker), worker


def fmt_top1(validation: dict) -> str:
    top1 = (validation or {}).get("top1") or []
    return " · ".join(f"{round(100 * v)}%" for v in top1)


class TrainHeadsDialog(QDialog):
    """Train heads for one model: how much text, which files, how long, which kind."""

    trained = Signal(str)  # the model id, once a drafter was saved
    running_changed = Signal(bool)
    model_busy = Signal(bool)  # training on the app's loaded model: no generation meanwhile

    def __init__(self, entry, loaded=None, device: str = "auto", generation_busy=None,
                 parent=None):  # fmt: skip
        super().__init__(parent)
        self.entry = entry
        self.loaded = loaded if loaded is not None and loaded.entry.id == entry.id else None
        self.device = device
        self.generation_busy = generation_busy or (lambda: False)
        self.out_dir = heads_folder(entry.id)
        self.row_length = 768
        self.batch = 512
        self.thread: QThread | None = None
        self.worker: HeadsTrainer | None = None
        self.setWindowTitle(f"Train drafting heads — {entry.name}")
        self.resize(560, 420)
        form = self._build_form()
        where = QLabel(f"Saved in {self.out_dir}")
        where.setWordWrap(True)
        where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.stage = QLabel("")
        self.progress = QProgressBar()
        self.progress.hide()
        self.message = QLabel(self._resume_hint())
        self.message.setWordWrap(True)
        buttons = self._build_buttons()
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(where)
        layout.addWidget(self.stage)
        layout.addWidget(self.progress)
        layout.addWidget(self.message)
        layout.addStretch(1)
        layout.addLayout(buttons)

    def _build_form(self) -> QFormLayout:
        """What to train on (self-written tokens, text files), for how many steps, which kind."""
        form = QFormLayout()
        self.tokens = QSpinBox()
        self.tokens.setRange(0, 100_000_000)
        self.tokens.setSingleStep(10_000)
        self.tokens.setValue(DEFAULT_TOKENS)
        self.tokens.setGroupSeparatorShown(True)
        self.tokens.setSpecialValueText("none")
        self.tokens.setToolTip(
            "The model first writes this much text of its own: the best teacher for drafting "
            "what it writes (slow on a CPU: a few minutes per 10,000 tokens)"
        )
        form.addRow("Self-written text (tokens)", self.tokens)
        self.files = QListWidget()
        self.files.setMaximumHeight(90)
        add_files, clear_files = QPushButton("Add files…"), QPushButton("Clear")
        add_files.clicked.connect(self._browse)
        clear_files.clicked.connect(self.files.clear)
        files_row = QHBoxLayout()
        files_row.addWidget(add_files)
        files_row.addWidget(clear_files)
        files_row.addStretch(1)
        form.addRow("Training text files", self.files)
        form.addRow("", files_row)
        self.steps = QSpinBox()
        self.steps.setRange(1, 1_000_000)
        self.steps.setSingleStep(100)
        self.steps.setValue(1500)
        self.steps.setGroupSeparatorShown(True)
        form.addRow("Steps", self.steps)
        self.kind = QComboBox()
        self.kind.addItems(KINDS)
        form.addRow("Kind", self.kind)
        return form

    def _build_buttons(self) -> QHBoxLayout:
        """Train, Cancel training (while it runs) and Close."""
        self.train_button = QPushButton("Train")
        self.train_button.setDefault(True)
        self.cancel_button = QPushButton("Cancel training")
        self.cancel_button.setEnabled(False)
        self.close_button = QPushButton("Close")
        self.train_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        self.close_button.clicked.connect(self.close)
        buttons = QHBoxLayout()
        buttons.addWidget(self.train_button)
        buttons.addWidget(self.cancel_button)
        buttons.addStretch(1)
        buttons.addWidget(self.close_button)
        return buttons

    @property
    def running(self) -> bool:
        return self.thread is not None

    def _resume_hint(self) -> str:
        if (self.out_dir / "checkpoint" / "state.json").is_file():
            return "A stopped training is kept here: Train resumes it (with the same kind)."
        return ""

    def _browse(self) -> None:
        names, _ = QFileDialog.getOpenFileNames(self, "Training text", "", "Text (*.txt *.md)")
        self.add_files(names)

    def add_files(self, names) -> None:
        for name in names:
            if name and not self.files.findItems(str(name), Qt.MatchFlag.MatchExactly):
                self.files.addItem(str(name))

    def text_files(self) -> list[str]:
        return [self.files.item(i).text() for i in range(self.files.count())]

    # -- running ----------------------------------------------------------------------------
    def start(self) -> bool:
        if self.running:
            return False
        files, tokens = self.text_files(), self.tokens.value()
        if not files and tokens <= 0:
            self.message.setText("Give training text files, or let the model write some text.")
            return False
        if self.loaded is not None and self.generation_busy():
            self.message.setText("A generation is running with this model: wait for it first.")
            return False
        job = TrainJob(
            entry=self.entry,
            out_dir=self.out_dir,
            kind=KINDS[self.kind.currentText()],
            steps=self.steps.value(),
            self_distill=tokens,
            text_files=files,
            loaded=self.loaded,
            device=self.device,
            row_length=self.row_length,
            batch=self.batch,
        )
        self.thread, self.worker = start_training(self, job)
        self.worker.progress.connect(self._on_progress)
        self.worker.done.connect(self._on_done)
        self.worker.stopped.connect(self.message.setText)
        self.worker.failed.connect(self._on_failed)
        self.thread.finished.connect(self._on_thread_finished)
        self.message.setText("")
        self.stage.setText("Starting…")
        self.progress.setRange(0, 0)
        self.progress.show()
        self._set_running(True)
        self.thread.start()
        return True

    def cancel(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.message.setText("Stopping after this step… (what was done is kept)")

    def _set_running(self, running: bool) -> None:
        for widget in (self.train_button, self.tokens, self.files, self.steps, self.kind):
            widget.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.running_changed.emit(running)
        if self.loaded is not None:
            self.model_busy.emit(running)

    def _on_progress(self, stage: str, done: int, total: int, loss) -> None:
        name = STAGES.get(stage, stage)
        if total > 0:
            self.progress.setRange(0, total)
            self.progress.setValue(min(done, total))
            text = f"{name}: {done:,} / {total:,}"
        else:
            self.progress.setRange(0, 0)
            text = f"{name}…"
        if loss is not None:
            text += f" · loss {loss:.3f}"
        self.stage.setText(text)

    def _on_done(self, summary: dict) -> None:
        top1 = fmt_top1(summary.get("validation", {}))
        self.message.setText(
            f"Trained: {summary.get('kind')} heads saved in {summary.get('folder')}"
            + (f" (held-out top-1 per head: {top1})" if top1 else "")
            + ". New generations draft with them."
        )
        self.trained.emit(self.entry.id)

    def _on_failed(self, message: str) -> None:
        self.message.setText(f"Training failed: {message}")

    def _on_thread_finished(self) -> None:
        thread, self.thread, self.worker = self.thread, None, None
        if thread is not None:
            thread.deleteLater()
        self.progress.hide()
        self._set_running(False)

    def wait(self, ms: int = 120_000) -> bool:
        return self.thread is None or self.thread.wait(ms)

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        if self.worker is not None:
            self.cancel()  # stops between two steps; the progress is kept
            self.wait()
            QCoreApplication.processEvents()  # deliver its last signals
        super().closeEvent(event)

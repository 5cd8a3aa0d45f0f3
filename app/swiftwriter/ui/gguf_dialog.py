"""Models > Add with a GGUF file: the conversion (modelstore.adding, the same as `swiftwriter
models add`) runs in a worker thread while this dialog shows what the file holds, what it will
take in memory and each step; Cancel stops it at the next step and nothing of it is kept (it
writes into a temporary folder renamed into place only at the end)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QVBoxLayout,
)

from swiftwriter import application
from swiftwriter.ui.stoppable import StoppableWorker, start_worker


class GgufAdder(StoppableWorker):
    """Runs in a QThread: checks, converts and registers one GGUF file."""

    progress = Signal(str)
    added = Signal(str)  # the new model's id
    what = "GGUF conversion"

    def __init__(self, model_id: str, path: Path, dtype: str = "auto"):
        super().__init__()
        self.model_id, self.path, self.dtype = model_id, path, dtype

    def _run(self) -> None:
        entry = application.add_gguf(
            self.model_id, self.path, self.dtype,
            progress=self.progress.emit, cancelled=self.should_stop,
        )  # fmt: skip
        self.added.emit(entry.id)


class AddGgufDialog(QDialog):
    """Converting one GGUF file, with its steps and a Cancel that leaves nothing behind."""

    added = Signal(str)  # the new model's id, once registered
    ended = Signal()  # the worker is done (added, refused, failed or cancelled)

    def __init__(self, model_id: str, path: Path, dtype: str = "auto", parent=None):
        super().__init__(parent)
        self.setWindowTitle(f"Adding {Path(path).name}")
        self.resize(620, 320)
        self.model_id = model_id
        self.outcome = ""  # the last line: added, or why not
        self.log = QPlainTextEdit(readOnly=True)
        self.bar = QProgressBar()
        self.bar.setRange(0, 0)  # steps, not a percentage
        self.status = QLabel(f"Converting {Path(path).name} into the model '{model_id}'…")
        self.status.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.buttons.rejected.connect(self.cancel)
        layout = QVBoxLayout(self)
        layout.addWidget(self.status)
        layout.addWidget(self.log, 1)
        layout.addWidget(self.bar)
        layout.addWidget(self.buttons)
        self.worker = GgufAdder(model_id, Path(path), dtype)
        self.thread_ = start_worker(self, self.worker)
        self.worker.progress.connect(self._step)
        self.worker.added.connect(self._added)
        self.worker.failed.connect(self._failed)
        self.thread_.finished.connect(self._finished)
        self.thread_.start()

    @property
    def running(self) -> bool:
        return self.thread_ is not None

    def _step(self, message: str) -> None:
        self.log.appendPlainText(message)

    def _added(self, model_id: str) -> None:
        self.outcome = f"Added {model_id}: choose it and press “Use this model”."
        self.added.emit(model_id)

    def _failed(self, message: str) -> None:
        self.outcome = message if message.startswith("Cancelled") else f"Not added: {message}"

    def _finished(self) -> None:
        self.thread_ = None
        self.bar.hide()
        self.status.setText(self.outcome)  # said once, above the steps (never again in them)
        self.buttons.setStandardButtons(QDialogButtonBox.StandardButton.Close)
        self.buttons.setEnabled(True)
        self.ended.emit()

    def cancel(self) -> None:
        """Stop at the next step (a step is never cut in half); nothing is kept."""
        if self.thread_ is None:
            self.reject()
            return
        self.worker.stop()
        self.buttons.setEnabled(False)
        self.status.setText("Cancelling after the current step…")

    def reject(self) -> None:  # Escape and the window's close button cancel too
        if self.thread_ is not None:
            self.cancel()
            return
        super().reject()

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        if self.thread_ is not None:
            self.worker.stop()
            self.thread_.wait(120000)
        super().closeEvent(event)

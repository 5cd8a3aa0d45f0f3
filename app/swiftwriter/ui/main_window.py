"""The main window: for now an editor and a status line that says which model is ready."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QLabel, QMainWindow, QPlainTextEdit

from swiftwriter.ui.model_worker import start_loader


class MainWindow(QMainWindow):
    model_ready = Signal(object)
    model_failed = Signal(str)

    def __init__(self, model: str | None = None, load_model: bool = True):
        super().__init__()
        self.setWindowTitle("SwiftWriter")
        self.resize(1100, 750)
        self.editor = QPlainTextEdit(self)
        self.editor.setPlaceholderText("Start writing, or give the model a first paragraph…")
        font = QFont("Serif")
        font.setPointSize(12)
        self.editor.setFont(font)
        self.setCentralWidget(self.editor)
        self.model_label = QLabel("No model", self)
        self.statusBar().addPermanentWidget(self.model_label)
        self.loaded_model = None
        self._loader = None
        if load_model:
            self.load_model(model)

    def load_model(self, model: str | None) -> None:
        self.model_label.setText("Loading model…")
        self._thread, self._loader = start_loader(self, model)
        self._loader.progress.connect(self.statusBar().showMessage)
        self._loader.loaded.connect(self._on_loaded)
        self._loader.failed.connect(self._on_failed)

    def _on_loaded(self, loaded) -> None:
        self.loaded_model = loaded
        self.model_label.setText(f"{loaded.entry.name} · {loaded.device} · {loaded.dtype}")
        self.statusBar().showMessage("Model ready", 5000)
        self.model_ready.emit(loaded)

    def _on_failed(self, message: str) -> None:
        self.model_label.setText("Model not loaded")
        self.statusBar().showMessage(message)
        self.model_failed.emit(message)

    def closeEvent(self, event) -> None:
        if getattr(self, "_thread", None) is not None and self._thread.isRunning():
            self._thread.quit()
            self._thread.wait(30000)
        super().closeEvent(event)

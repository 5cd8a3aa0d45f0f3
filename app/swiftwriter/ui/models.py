"""The model the window writes with: loading it off the GUI thread, the Models window, heads
trained for it. The window's controller for models; it sets the window's `loaded_model` and
`model_training`, which the rest of the window reads."""

from __future__ import annotations

from PySide6.QtCore import QObject

from swiftwriter import application
from swiftwriter.ui.model_manager import ModelManagerDialog
from swiftwriter.ui.model_worker import start_loader


class ModelController(QObject):
    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self._thread = None
        self._loader = None

    def load_model(self, model: str | None) -> None:
        if self._thread is not None and self._thread.isRunning():
            self.window.statusBar().showMessage("A model is already loading", 5000)
            return
        self.window.model_label.setText("Loading model…")
        self._thread, self._loader = start_loader(
            self, model, self.window.settings.device, self.window.settings.dtype, self.window.settings.max_memory,
            progress=self.window.statusBar().showMessage, loaded=self._on_loaded,
            failed=self._on_failed)  # fmt: skip

    def set_model(self, loaded) -> None:
        """Use an already loaded model (a modelstore LoadedModel); tests pass tiny ones."""
        self._on_loaded(loaded)

    def _on_loaded(self, loaded) -> None:
        self.window.loaded_model = loaded
        self.window.model_label.setText(f"{loaded.entry.name} · {loaded.device} · {loaded.dtype}")
        kernel = (
            application.kernel_notice() if loaded.device == "cpu" else None
        )  # a failed build's why
        self.window.statusBar().showMessage(
            f"Model ready; {kernel}" if kernel else "Model ready", 15000 if kernel else 5000
        )
        self.window.update_actions()
        self.window.model_ready.emit(loaded)

    def _on_failed(self, message: str) -> None:
        self.window.model_label.setText("Model not loaded")
        self.window.statusBar().showMessage(message)
        self.window.model_failed.emit(message)

    def open_models(self):

        current = (
            self.window.loaded_model.entry.id if self.window.loaded_model is not None else None
        )
        dialog = ModelManagerDialog(self.window.settings, current, self.window, loaded=self.window.loaded_model,
                                    generation_busy=lambda: self.window.takes.busy)  # fmt: skip
        dialog.use_model.connect(self._use_model)
        dialog.drafter_trained.connect(self._on_drafter_trained)
        dialog.model_busy.connect(self._on_model_training)
        self.window.open_dialogs.append(dialog)
        dialog.show()
        return dialog

    def _on_drafter_trained(self, model_id: str) -> None:
        """New heads for a model: the loaded one drafts with them from the next generation."""
        loaded = self.window.loaded_model
        if loaded is None or loaded.entry.id != model_id:
            return
        application.reload_drafter(loaded)
        state = loaded.drafter_status.split(":", 1)[0]
        self.window.statusBar().showMessage(
            f"Drafting heads for {loaded.entry.name}: {state}", 8000
        )

    def _on_model_training(self, busy: bool) -> None:
        self.window.model_training = busy
        self.window.update_actions()

    def _use_model(self, model_id: str) -> None:
        self.window.settings.model = model_id
        self.load_model(model_id)

    def wait(self, ms: int = 30000) -> None:
        """Before the window closes: a model still loading is waited for."""
        if self._thread is not None and self._thread.isRunning():
            self._thread.quit()
            self._thread.wait(ms)

"""Loading (and on first run converting) the model off the GUI thread."""

from __future__ import annotations

from PySide6.QtCore import QObject, QThread, Signal


class ModelLoader(QObject):
    """Runs in a QThread: converts the default model if needed, then loads it."""

    progress = Signal(str)
    loaded = Signal(object)  # a modelstore LoadedModel
    failed = Signal(str)

    def __init__(self, model: str | None):
        super().__init__()
        self.model = model

    def run(self) -> None:
        try:
            from swiftwriter.errors import UserError
            from swiftwriter.modelstore import loader, provision, registry

            entry = registry.resolve(self.model)
            if not entry.is_ready() and entry.source == "pypi-gguf":
                provision.convert(entry, progress=self.progress.emit)
            self.progress.emit(f"Loading {entry.name}…")
            self.loaded.emit(loader.load(entry))
        except UserError as exc:
            self.failed.emit(str(exc))
        except Exception as exc:  # shown to the user, never a crash
            self.failed.emit(f"Could not load the model: {exc}")


def start_loader(parent: QObject, model: str | None) -> tuple[QThread, ModelLoader]:
    thread = QThread(parent)
    worker = ModelLoader(model)
    worker.moveToThread(thread)
    thread.started.connect(worker.run)
    worker.loaded.connect(thread.quit)
    worker.failed.connect(thread.quit)
    thread.start()
    return thread, worker

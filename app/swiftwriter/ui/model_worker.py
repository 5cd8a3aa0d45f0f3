"""Loading (and on first run converting) the model off the GUI thread, on the device and dtype
the writer chose (auto by default: the loader measures which dtype pays on this CPU)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, QThread, Signal


class ModelLoader(QObject):
    """Runs in a QThread: converts the default model if needed, then loads it."""

    progress = Signal(str)
    loaded = Signal(object)  # a modelstore LoadedModel
    failed = Signal(str)

    def __init__(self, model: str | None, device: str = "auto", dtype: str = "auto"):
        super().__init__()
        self.model = model
        self.device = device
        self.dtype = dtype

    def run(self) -> None:
        try:
            from swiftwriter.errors import UserError
            from swiftwriter.modelstore import loader, provision, registry

            entry = registry.resolve(self.model)
            if not entry.is_ready() and entry.source == "pypi-gguf":
                provision.convert(entry, progress=self.progress.emit)
            self.progress.emit(f"Loading {entry.name}…")
            self.loaded.emit(loader.load(entry, device=self.device, dtype=self.dtype))
        except UserError as exc:
            self.failed.emit(str(exc))
        except Exception as exc:  # shown to the user, never a crash
            self.failed.emit(f"Could not load the model: {exc}")


def start_loader(
    parent: QObject, model: str | None, device: str = "auto", dtype: str = "auto"
) -> tuple[QThread, ModelLoader]:
    thread = QThread(parent)
    worker = ModelLoader(model, device, dtype)
    worker.moveToThread(thread)
    thread.started.connect(worker.run)
    worker.loaded.connect(thread.quit, Qt.ConnectionType.DirectConnection)
    worker.failed.connect(thread.quit, Qt.ConnectionType.DirectConnection)
    thread.start()
    return thread, worker


class ModelConverter(QObject):
    """Runs in a QThread: converts a shipped (GGUF) model into its folder, reporting progress."""

    progress = Signal(str)
    done = Signal(str)
    failed = Signal(str)

    def __init__(self, model_id: str):
        super().__init__()
        self.model_id = model_id

    def run(self) -> None:
        try:
            from swiftwriter.errors import UserError
            from swiftwriter.modelstore import provision, registry

            entry = registry.resolve(self.model_id)
            folder = provision.convert(entry, progress=self.progress.emit)
            self.done.emit(str(folder))
        except UserError as exc:
            self.failed.emit(str(exc))
        except Exception as exc:  # shown to the user, never a crash
            self.failed.emit(f"Could not convert the model: {exc}")


def start_converter(parent: QObject, model_id: str) -> tuple[QThread, ModelConverter]:
    thread = QThread(parent)
    worker = ModelConverter(model_id)
    worker.moveToThread(thread)
    thread.started.connect(worker.run)
    worker.done.connect(thread.quit, Qt.ConnectionType.DirectConnection)
    worker.failed.connect(thread.quit, Qt.ConnectionType.DirectConnection)
    thread.start()
    return thread, worker

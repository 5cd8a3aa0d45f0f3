"""Loading (and on first run converting) the model off the GUI thread, on the device and dtype
the writer chose (auto by default: the loader measures which dtype pays on this CPU)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, QThread, Signal


class ModelLoader(QObject):
    """Runs in a QThread: converts the default model if needed, then loads it."""

    progress = Signal(str)
    loaded = Signal(object)  # a modelstore LoadedModel
    failed = Signal(str)

    def __init__(
        self, model: str | None, device: str = "auto", dtype: str = "auto", max_memory: str = ""
    ):
        super().__init__()
        self.model = model
        self.device = device  # one device, or "spread" (accelerate, within `max_memory`)
        self.dtype = dtype
        self.max_memory = max_memory

    def run(self) -> None:
        try:
            from swiftwriter.errors import UserError
            from swiftwriter.modelstore import loader, provision, registry

            entry = registry.resolve(self.model)
            if not entry.is_ready() and entry.source == "pypi-gguf":
                provision.convert(entry, progress=self.progress.emit)
            self.progress.emit(f"Loading {entry.name}…")
            if self.device == "spread":
                from swiftwriter.modelstore.placement import Placement, parse_max_memory

                limits = parse_max_memory(self.max_memory) if self.max_memory else {}
                placed = Placement("auto", "auto", limits)
                self.loaded.emit(loader.load_placed(entry, placed, dtype=self.dtype))
            else:
                self.loaded.emit(loader.load(entry, device=self.device, dtype=self.dtype))
        except UserError as exc:
            self.failed.emit(str(exc))
        except Exception as exc:  # shown to the user, never a crash
            from swiftwriter import logs

            self.failed.emit(logs.unexpected("Loading the model", exc))


def _start(parent: QObject, worker: QObject, finished_signal, slots: dict) -> QThread:
    """Connects the caller's slots *before* the thread starts: a worker that finishes at once
    (a cached model, a failure) would otherwise emit into no connection and the GUI would wait
    for ever on a message that was already sent."""
    thread = QThread(parent)
    worker.moveToThread(thread)
    thread.started.connect(worker.run)
    finished = slots.pop("finished", None)
    if finished is not None:
        thread.finished.connect(finished)
    for name, slot in slots.items():  # the worker's own signals, by name
        getattr(worker, name).connect(slot)
    finished_signal.connect(thread.quit, Qt.ConnectionType.DirectConnection)
    worker.failed.connect(thread.quit, Qt.ConnectionType.DirectConnection)
    thread.start()
    return thread


def start_loader(
    parent: QObject,
    model: str | None,
    device: str = "auto",
    dtype: str = "auto",
    max_memory: str = "",
    **slots,
) -> tuple[QThread, ModelLoader]:
    """Starts loading; ``slots`` (progress, loaded, failed, finished) are connected first."""
    worker = ModelLoader(model, device, dtype, max_memory)
    return _start(parent, worker, worker.loaded, slots), worker


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
            from swiftwriter import logs

            self.failed.emit(logs.unexpected("Converting the model", exc))


def start_converter(parent: QObject, model_id: str, **slots) -> tuple[QThread, ModelConverter]:
    """Starts converting; ``slots`` (progress, done, failed, finished) are connected first."""
    worker = ModelConverter(model_id)
    return _start(parent, worker, worker.done, slots), worker

"""Loading (and on first run converting) the model off the GUI thread, on the device and dtype
the writer chose (auto by default: the loader measures which dtype pays on this CPU)."""

from __future__ import annotations

from PySide6.QtCore import QObject, QThread, Signal

from swiftwriter import application
from swiftwriter.ui.stoppable import StoppableWorker, start_worker


class ModelLoader(StoppableWorker):
    """Runs in a QThread: converts the default model if needed, then loads it."""

    progress = Signal(str)
    loaded = Signal(object)  # a modelstore LoadedModel
    what = "model loading"

    def __init__(
        self, model: str | None, device: str = "auto", dtype: str = "auto", max_memory: str = ""
    ):
        super().__init__()
        self.model = model
        self.device = device  # one device, or "spread" (accelerate, within `max_memory`)
        self.dtype = dtype
        self.max_memory = max_memory

    def _run(self) -> None:
        self.loaded.emit(
            application.load_model(self.model, self.device, self.dtype, self.max_memory,
                                   progress=self.progress.emit)
        )  # fmt: skip


def _start(parent: QObject, worker: StoppableWorker, slots: dict) -> QThread:
    """The one thread starter (`start_worker`), with the caller's slots connected *before*
    the thread starts: a worker that finishes at once (a cached model, a failure) would
    otherwise emit into no connection and the GUI would wait for ever."""
    thread = start_worker(parent, worker)
    finished = slots.pop("finished", None)
    if finished is not None:
        thread.finished.connect(finished)
    for name, slot in slots.items():  # the worker's own signals, by name
        getattr(worker, name).connect(slot)
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
    return _start(parent, worker, slots), worker


class ModelConverter(StoppableWorker):
    """Runs in a QThread: converts a shipped (GGUF) model into its folder, reporting progress."""

    progress = Signal(str)
    done = Signal(str)
    what = "model conversion"

    def __init__(self, model_id: str):
        super().__init__()
        self.model_id = model_id

    def _run(self) -> None:
        folder = application.convert_model(self.model_id, progress=self.progress.emit)
        self.done.emit(str(folder))


def start_converter(parent: QObject, model_id: str, **slots) -> tuple[QThread, ModelConverter]:
    """Starts converting; ``slots`` (progress, done, failed, finished) are connected first."""
    worker = ModelConverter(model_id)
    return _start(parent, worker, slots), worker

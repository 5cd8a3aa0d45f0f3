"""A GGUF model converted in the dtype `auto` picks here: the loader's choice (the model's own
setting, a GPU's, or on a CPU measured on the float32 weights just read and remembered like
every load's) handed to the conversion (provision.py), which knows nothing of loading. The
conversion sits below the loader (an exact load may convert again in a named dtype); choosing
`auto` needs the loader, so it is made here, above both."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from swiftwriter.errors import UserError
from swiftwriter.modelstore import loader, provision
from swiftwriter.modelstore.registry import ModelEntry


def planned_dtype(entry: ModelEntry, dtype: str | None) -> str | None:
    """The dtype to store, when it is known before the weights are read: asked for by name,
    the model's own setting, or a GPU's; None when `auto` must measure on this CPU."""
    if dtype and dtype != "auto":
        if dtype not in loader.DTYPE_NAMES:
            raise UserError(
                f"Unknown dtype '{dtype}' (use auto, stored, float32, bfloat16 or float16)"
            )
        return loader.DTYPE_NAMES[dtype]
    device = loader.pick_device("auto")
    if device == "cpu" and entry.dtype.get("cpu", "auto") == "auto":
        # the weights stay in the file, read at each load as stored or de-quantized into
        # the dtype `auto` measures fastest then; without the kernel: measured now, on floats
        return None if loader.can_store(entry) else provision.STORED
    return loader.pick_dtype(entry, device, "auto")


def auto_dtype(entry: ModelEntry, folder: Path) -> tuple[str, str]:
    """What `auto` picks for this model here, measured on the float32 folder just written
    (under the model's own id, so the choice is remembered for its later loads). A choice
    not remembered (the machine was busy: the next load measures again and may choose the
    other) stores float32, which serves either dtype exactly."""
    found = loader.cpu_dtype_choice(replace(entry, source="folder", path=folder))
    why = loader.dtype_reason(found)
    if found.value != "float32" and not found.remembered:
        return "float32", f"{why}; kept in float32 until a quiet measurement chooses"
    return str(found.value), why


def convert(
    entry: ModelEntry,
    progress: provision.Progress | None = None,
    force: bool = False,
    dtype: str | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Path:
    """provision.convert in `dtype` (None or "auto": what `auto` picks here)."""
    planned = planned_dtype(entry, dtype)
    return provision.convert(entry, progress, force, planned, cancelled, auto=auto_dtype)


def convert_into(
    entry: ModelEntry,
    gguf: Path,
    final: Path,
    dtype: str | None,
    say: provision.Progress,
    cancelled: Callable[[], bool] | None = None,
) -> dict:
    """provision.convert_into in `dtype` (None or "auto": what `auto` picks here)."""
    planned = planned_dtype(entry, dtype)
    return provision.convert_into(entry, gguf, final, planned, say, cancelled, auto=auto_dtype)

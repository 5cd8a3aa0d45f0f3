"""The application facade: the one door through which the window (ui/) reaches the engine, the
drafter training and the model store. The window knows what a writer can do with models (list,
add, load, convert, train heads, price a placement) and the panel's settings; it does not know
which package does it, so either side can change without the other (tests/test_layout.py holds
that ui/ imports those packages through here only).

Importing this module imports no torch: the calls that need it (loading a model, checking
drafting heads against one, training, the native kernel's state) import it when called."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from swiftwriter.engine.decoding.settings import (
    DEFAULT_SAMPLER,
    MODES,
    STRATEGIES,
    ContextSettings,
    DraftSettings,
    SamplingSettings,
)
from swiftwriter.engine.decoding.stats import RunStats
from swiftwriter.modelstore import adding, auto_convert, guidance, loader, placement, registry
from swiftwriter.modelstore.loader import drafter_dirs
from swiftwriter.modelstore.placement import STORED
from swiftwriter.modelstore.registry import ModelEntry

__all__ = [
    "DEFAULT_SAMPLER",
    "MODES",
    "STORED",
    "STRATEGIES",
    "ContextSettings",
    "DraftSettings",
    "ModelEntry",
    "RunStats",
    "SamplingSettings",
    "add_gguf",
    "add_user_model",
    "advice_for_this_machine",
    "check_drafter",
    "convert_model",
    "drafter_dirs",
    "kernel_notice",
    "load_for_training",
    "load_model",
    "load_registry",
    "is_gguf_path",
    "placement_estimate",
    "reload_drafter",
    "train_drafter",
    "validate_folder",
]

# The model store's calls go through its modules at call time (not names bound here), so a
# test that replaces one in its module replaces it for the window too.


def advice_for_this_machine(current: str | None = None):
    """Which model sizes suit this machine, and what the built-in one is for."""
    return guidance.for_this_machine(current)


def load_registry() -> dict[str, ModelEntry]:
    return registry.load_registry()


def validate_folder(path: Path) -> None:
    """Raises UserError where `path` is not a model folder transformers can load."""
    registry.validate_folder(path)


def add_user_model(model_id: str, path: Path) -> ModelEntry:
    return registry.add_user_model(model_id, path)


def is_gguf_path(path: Path) -> bool:
    return adding.is_gguf_path(path)


def add_gguf(model_id: str, path: Path, dtype: str = "auto", **hooks) -> ModelEntry:
    """A GGUF file added as a model (`hooks`: progress and cancelled, adding.add_gguf's)."""
    return adding.add_gguf(model_id, path, dtype, **hooks)


def load_model(
    name: str | None,
    device: str = "auto",
    dtype: str = "auto",
    max_memory: str = "",
    progress: Callable[[str], None] = lambda line: None,
):
    """A model ready to write with (a modelstore LoadedModel): the shipped GGUF converted
    first where it has not been yet; `device` "spread" places it over several devices
    within `max_memory` (accelerate)."""
    entry = registry.resolve(name)
    if not entry.is_ready() and entry.source == "pypi-gguf":
        auto_convert.convert(entry, progress=progress)
    progress(f"Loading {entry.name}…")
    if device == "spread":
        limits = placement.parse_max_memory(max_memory) if max_memory else {}
        placed = placement.Placement("auto", "auto", limits)
        return loader.load_placed(entry, placed, dtype=dtype)
    return loader.load(entry, device=device, dtype=dtype)


def convert_model(model_id: str, progress: Callable[[str], None]) -> Path:
    """A shipped model converted into its folder: the folder."""
    return auto_convert.convert(registry.resolve(model_id), progress=progress)


def reload_drafter(loaded) -> None:
    """The loaded model's drafting heads read again (new ones were trained): a mismatch is
    kept as the drafter's status, never raised."""
    try:
        loaded.drafter, loaded.drafter_status = loader.load_drafter(loaded)
    except Exception as exc:  # noqa: BLE001 - a status line, never a crash
        loaded.drafter, loaded.drafter_status = None, f"mismatched: {exc}"


def check_drafter(folder: Path, model) -> None:
    """Raises UserError where the heads in `folder` cannot draft for `model`, the way a
    generation would find out."""
    from swiftwriter.engine.decoding import drafter_files  # lazy: torch

    drafter_files.load(folder, model)


def placement_estimate(
    entry: ModelEntry, device: str, dtype: str, context: int, limits: str
) -> str:
    """What `entry` needs on `device` in `dtype` with a KV cache of `context` tokens (per
    device when spread); in the stored format, the blocks it computes from."""
    stored = guidance.gguf_bytes(entry) if dtype == STORED else None
    return placement.describe(entry.folder(), device, dtype, context, limits, stored)


def kernel_notice() -> str | None:
    """Why the native CPU kernel is not in use (a failed build), or None."""
    from swiftwriter.engine.passes import native_notice  # lazy: torch

    return native_notice()


def train_drafter(loaded, entry: ModelEntry, out_dir: Path, kind: str, steps: int, batch: int,
                  **options):  # fmt: skip
    """Drafting heads trained on `loaded` and saved in `out_dir` (training.pipeline); None
    when stopped. `options` are the pipeline's (given rows, self-distillation, progress)."""
    from swiftwriter.training.pipeline import train_drafter as train  # lazy: torch
    from swiftwriter.training.train import TrainSettings  # lazy: torch

    settings = TrainSettings(kind=kind, steps=steps, batch=batch)
    return train(loaded.model, loaded.tokenizer, entry.id, out_dir, settings, **options)


def load_for_training(entry: ModelEntry, device: str):
    """The model in float32 without heads: what heads are trained against."""
    return loader.load(entry, device=device, dtype="float32", with_drafter=False)

"""The whole training of a drafter, shared by `swiftwriter heads train` and the app: training
text (given token rows and/or the model's own writing), teacher features, then training, every
stage resumable from the output folder and cancellable between steps."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from swiftwriter.engine.decoding.drafter_files import DrafterBundle
from swiftwriter.training import features, selfdistill
from swiftwriter.training.train import TrainSettings, train

# on_progress(stage, done, total, loss): stage is "writing", "features" or "training"
Progress = Callable[[str, int, int, float | None], None]


def _read_features(model, texts: list[Path], settings: TrainSettings, on_progress, should_stop):
    """The teacher's features of every text (made where missing, under the drafter's
    penalty), loaded; None when stopped."""
    feats = features.ensure_features(
        model,
        texts,
        on_progress=on_progress,
        should_stop=should_stop,
        penalty=settings.penalty,
        window=settings.window,
    )
    if should_stop and should_stop():
        return None
    return features.load_features(feats, texts)


def _keep_given(given: Path, given_rows: torch.Tensor) -> None:
    """The given text's rows kept in the work folder; its features are made again only when
    the text changed."""
    rows = given_rows.to(torch.int32).contiguous()
    if not given.is_file() or not torch.equal(load_file(str(given))["tokens"], rows):
        features.feature_path(given).unlink(missing_ok=True)  # stale for new text
        save_file({"tokens": rows}, str(given))


def train_drafter(
    model,
    tokenizer,
    model_id: str,
    out_dir: Path,
    settings: TrainSettings,
    given_rows: torch.Tensor | None = None,
    self_distill: int = 0,
    row_length: int = 768,
    write_batch: int = 16,
    distill_modes: Sequence[str] = selfdistill.DEFAULT_MODES,
    on_progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> DrafterBundle | None:
    """Train and save into `out_dir`; None when stopped (run again to resume)."""
    out_dir = Path(out_dir)
    work = out_dir / "work"
    work.mkdir(parents=True, exist_ok=True)

    def report(stage):
        return (lambda d, t, loss=None: on_progress(stage, d, t, loss)) if on_progress else None

    given = work / "given-text.safetensors"
    if given_rows is not None:
        _keep_given(given, given_rows)
    if self_distill > 0:
        selfdistill.write_text(
            model,
            tokenizer,
            work,
            self_distill,
            batch=write_batch,
            length=row_length,
            on_progress=report("writing"),
            should_stop=should_stop,
            modes=distill_modes,
        )
    texts = selfdistill.shard_paths(work) + ([given] if given_rows is not None else [])
    if not texts:
        return None
    data = _read_features(model, texts, settings, report("features"), should_stop)
    if data is None:
        return None
    progress = report("training")
    return train(
        model, model_id, data, out_dir, settings, on_progress=progress, should_stop=should_stop
    )

"""Teacher features of training text: one pass of the frozen model over each text shard gives
the hidden states the drafters read (final and pre-norm) and the model's own next-token
distribution (top 32 ids and probabilities), the self-distillation target. Computed once per
shard and kept beside the text, so training runs and resumes without the model's forward pass.

The target is the distribution the engine verifies against: the model's logits after the
contextual penalty over the text's own window (it changes the first choice at about half of the
positions on prose), so a drafter learns the token the penalised target will accept."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from swiftwriter import atomic
from swiftwriter.engine.decoding.logits import LogitsPipeline, penalise
from swiftwriter.engine.passes import PrenormCapture, execution_device

TOP = 32


def feature_path(text_path: Path) -> Path:
    return text_path.with_name("feat-" + text_path.name)


def window_presence(
    tokens: torch.Tensor,
    rows: torch.Tensor,
    positions: torch.Tensor,
    window: int,
    index: torch.Tensor | None,
    size: int,
) -> torch.Tensor:
    """Bool [B, size]: which ids occur in tokens[rows[b], positions[b]-window+1 .. positions[b]]
    (the penalty window of the prediction made at that position). `index` maps a token id to
    its column (-1: no column), e.g. into a drafter's smaller vocabulary."""
    offsets = positions[:, None] - torch.arange(window, device=positions.device)[None, :]
    valid = offsets >= 0
    ids = tokens[rows[:, None], offsets.clamp_min(0)].long()
    if index is not None:
        ids = index[ids]
        valid &= ids >= 0
    mask = torch.zeros(len(rows), size + 1, dtype=torch.bool, device=tokens.device)
    mask.scatter_(1, torch.where(valid, ids, torch.full_like(ids, size)), True)
    return mask[:, :size]


def _penalise_rows(logits: torch.Tensor, ids: torch.Tensor, penalty: float, window: int) -> None:
    """Each row's logits penalised in place over that row's own window, position by position."""
    device, length = ids.device, ids.shape[1]
    for b in range(ids.shape[0]):
        presence = window_presence(
            ids[b : b + 1],
            torch.zeros(length, dtype=torch.long, device=device),
            torch.arange(length, device=device),
            window,
            None,
            logits.shape[-1],
        )
        logits[b] = penalise(logits[b], presence, penalty)


@torch.inference_mode()
def extract_rows(
    model,
    rows: torch.Tensor,
    chunk: int = 4,
    penalty: float = 1.0,
    window: int = 1024,
    on_rows: Callable[[int], None] | None = None,
    filters: LogitsPipeline | None = None,
) -> dict[str, torch.Tensor]:
    """rows [B, L] token ids -> final/prenorm fp16 [B, L, H], top ids int32 / probs fp16
    [B, L, TOP] of the model's distribution after the penalty over each row's own window.
    `on_rows(n)` after each chunk: the rows done so far. With `filters` (a sampled preset's
    pipeline without its penalty) also "sampled_ids" / "sampled_probs" (float32): the top
    TOP of the distribution that preset samples from, made from the full vocabulary."""
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    device = execution_device(head)
    capture = PrenormCapture(model)
    out = {"final": [], "prenorm": [], "top_ids": [], "top_probs": []}
    if filters is not None:
        out |= {"sampled_ids": [], "sampled_probs": []}
    try:
        for start in range(0, rows.shape[0], chunk):
            ids = rows[start : start + chunk].to(device)
            final = decoder(input_ids=ids).last_hidden_state
            logits = head(final).float()
            if penalty != 1.0:
                _penalise_rows(logits, ids, penalty, window)
            top = logits.softmax(-1).topk(TOP, dim=-1)
            if filters is not None:
                sampled = filters.process(logits, None).softmax(-1).topk(TOP, dim=-1)
                out["sampled_ids"].append(sampled.indices.to(torch.int32).cpu())
                out["sampled_probs"].append(sampled.values.cpu())
            out["final"].append(final.half().cpu())
            out["prenorm"].append(capture.value.half().cpu())
            out["top_ids"].append(top.indices.to(torch.int32).cpu())
            out["top_probs"].append(top.values.half().cpu())
            if on_rows:
                on_rows(start + ids.shape[0])
    finally:
        capture.close()
    return {k: torch.cat(v) for k, v in out.items()}


def _target_of(path: Path) -> dict[str, str] | None:
    with safe_open(str(path), framework="pt") as f:
        return f.metadata()


def ensure_features(
    model,
    text_paths: list[Path],
    on_progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    penalty: float = 1.0,
    window: int = 1024,
) -> list[Path]:
    """Feature files for every text shard (computing the missing ones and those made for
    another penalty, atomically). Progress counts rows, so it moves within a shard."""
    target = {"penalty": repr(float(penalty)), "window": str(int(window))}
    sizes = [_rows_in(p) for p in text_paths]
    total, before = sum(sizes), 0
    done = []
    for text_path, size in zip(text_paths, sizes, strict=True):
        path = feature_path(text_path)
        if not path.is_file() or _target_of(path) != target:
            if should_stop and should_stop():
                break
            rows = load_file(str(text_path))["tokens"].long()
            within = None
            if on_progress:
                within = lambda n, before=before: on_progress(min(before + n, total - 1), total)  # noqa: E731
            feats = extract_rows(model, rows, penalty=penalty, window=window, on_rows=within)
            tensors = {k: v.contiguous() for k, v in feats.items()}
            atomic.replace_with(path, functools.partial(save_file, tensors, metadata=target))
        done.append(path)
        before += size
        if on_progress:
            on_progress(before, total)
    return done


def _rows_in(text_path: Path) -> int:
    with safe_open(str(text_path), framework="pt") as f:
        return int(f.get_slice("tokens").get_shape()[0])


def load_features(paths: list[Path], text_paths: list[Path]) -> dict[str, torch.Tensor]:
    """All shards concatenated along the row axis, with the tokens under 'tokens'."""
    parts: dict[str, list[torch.Tensor]] = {}
    for fp, tp in zip(paths, text_paths, strict=True):
        feats = load_file(str(fp))
        feats["tokens"] = load_file(str(tp))["tokens"].long()
        for k, v in feats.items():
            parts.setdefault(k, []).append(v)
    return {k: torch.cat(v) for k, v in parts.items()}

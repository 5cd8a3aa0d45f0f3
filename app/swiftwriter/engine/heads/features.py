"""Teacher features of training text: one pass of the frozen model over each text shard gives
the hidden states the drafters read (final and pre-norm) and the model's own next-token
distribution (top 32 ids and probabilities), the self-distillation target. Computed once per
shard and kept beside the text, so training runs and resumes without the model's forward pass."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from swiftwriter.engine.heads.drafters import PrenormCapture

TOP = 32


def feature_path(text_path: Path) -> Path:
    return text_path.with_name("feat-" + text_path.name)


@torch.inference_mode()
def extract_rows(model, rows: torch.Tensor, chunk: int = 4) -> dict[str, torch.Tensor]:
    """rows [B, L] token ids -> final/prenorm fp16 [B, L, H], top ids int32 / probs fp16 [B, L, TOP]."""
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    device = head.weight.device
    capture = PrenormCapture(model)
    out = {"final": [], "prenorm": [], "top_ids": [], "top_probs": []}
    try:
        for start in range(0, rows.shape[0], chunk):
            ids = rows[start : start + chunk].to(device)
            final = decoder(input_ids=ids).last_hidden_state
            probs = head(final).float().softmax(-1)
            top = probs.topk(TOP, dim=-1)
            out["final"].append(final.half().cpu())
            out["prenorm"].append(capture.value.half().cpu())
            out["top_ids"].append(top.indices.to(torch.int32).cpu())
            out["top_probs"].append(top.values.half().cpu())
    finally:
        capture.close()
    return {k: torch.cat(v) for k, v in out.items()}


def ensure_features(
    model,
    text_paths: list[Path],
    on_progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> list[Path]:
    """Feature files for every text shard (computing the missing ones, atomically)."""
    done = []
    for i, text_path in enumerate(text_paths):
        path = feature_path(text_path)
        if not path.is_file():
            if should_stop and should_stop():
                break
            rows = load_file(str(text_path))["tokens"].long()
            feats = extract_rows(model, rows)
            tmp = path.with_name(path.name + ".tmp")
            save_file({k: v.contiguous() for k, v in feats.items()}, str(tmp))
            os.replace(tmp, path)
        done.append(path)
        if on_progress:
            on_progress(i + 1, len(text_paths))
    return done


def load_features(paths: list[Path], text_paths: list[Path]) -> dict[str, torch.Tensor]:
    """All shards concatenated along the row axis, with the tokens under 'tokens'."""
    parts: dict[str, list[torch.Tensor]] = {}
    for fp, tp in zip(paths, text_paths, strict=True):
        feats = load_file(str(fp))
        feats["tokens"] = load_file(str(tp))["tokens"].long()
        for k, v in feats.items():
            parts.setdefault(k, []).append(v)
    return {k: torch.cat(v) for k, v in parts.items()}

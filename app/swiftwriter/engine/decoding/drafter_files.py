"""Drafter files: weights in safetensors (never pickle) plus a JSON card saying which base model
they belong to, how they were trained and how well they draft. A drafter that does not match a
model (hidden size, vocabulary, config hash) is refused with a clear message."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from swiftwriter import atomic
from swiftwriter.engine.decoding.drafters import build
from swiftwriter.errors import UserError

FORMAT = "swiftwriter-drafter/1"
WEIGHTS, CARD = "drafter.safetensors", "card.json"
_CONFIG_KEYS = (
    "model_type",
    "hidden_size",
    "vocab_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "rms_norm_eps",
    "tie_word_embeddings",
)


def config_hash(config) -> str:
    """A short hash of the architecture fields that make hidden states comparable."""
    fields = {k: getattr(config, k, None) for k in _CONFIG_KEYS}
    blob = json.dumps(fields, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def rms_eps(config) -> float:
    return float(getattr(config, "rms_norm_eps", None) or 1e-5)


@dataclass
class DrafterBundle:
    """A loaded drafter with its draft vocabulary (token ids whose lm_head rows score drafts)."""

    module: torch.nn.Module
    vocab: torch.Tensor  # int64 [N]
    card: dict
    folder: Path | None = None

    @property
    def kind(self) -> str:
        return self.card["kind"]


def save(folder: Path, bundle: DrafterBundle) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().float().contiguous() for k, v in bundle.module.state_dict().items()}
    tensors["draft_vocab"] = bundle.vocab.to(torch.int64).contiguous()
    # each file whole or the old one (atomic.py), readable by others as a copied file is
    write = functools.partial(save_file, tensors, metadata={"format": FORMAT})
    atomic.replace_with(folder / WEIGHTS, write, mode=0o644)
    card = json.dumps(bundle.card, indent=2, sort_keys=True).encode()
    atomic.replace_with(folder / CARD, lambda tmp: Path(tmp).write_bytes(card), mode=0o644)


def make_card(model, kind: str, model_id: str, vocab: torch.Tensor, **extra) -> dict:
    cfg = model.config
    card = {
        "format": FORMAT,
        "kind": kind,
        "base_model": model_id,
        "config_hash": config_hash(cfg),
        "hidden_size": int(cfg.hidden_size),
        "vocab_size": int(model.get_output_embeddings().out_features),
        "draft_vocab_size": int(vocab.numel()),
    }
    card.update(extra)
    return card


def load(folder: Path, model=None) -> DrafterBundle:
    """Load and check against `model` (when given). Raises UserError when unusable."""
    folder = Path(folder)
    card_path, weights_path = folder / CARD, folder / WEIGHTS
    if not card_path.is_file() or not weights_path.is_file():
        raise UserError(f"No drafter in {folder} (expected {CARD} and {WEIGHTS})")
    try:
        card = json.loads(card_path.read_text(encoding="utf-8"))
        tensors = load_file(str(weights_path))
    except (OSError, ValueError, json.JSONDecodeError) as exc:
        raise UserError(f"The drafter in {folder} is unreadable: {exc}") from exc
    if card.get("format") != FORMAT:
        raise UserError(f"{card_path} is not a SwiftWriter drafter card ({FORMAT})")
    if model is not None:
        check_matches(card, model, folder)
    vocab = tensors.pop("draft_vocab", None)
    if vocab is None:
        raise UserError(f"{weights_path} has no draft vocabulary")
    module = build(
        card["kind"],
        card["hidden_size"],
        eps=card.get("eps", 1e-5),
        n_heads=card.get("n_heads", 3),
        intermediate=card.get("intermediate"),
    )
    try:
        module.load_state_dict(tensors, strict=True)
    except RuntimeError as exc:
        raise UserError(f"The drafter weights in {folder} do not fit its card: {exc}") from exc
    module.eval()
    return DrafterBundle(module=module, vocab=vocab.long(), card=card, folder=folder)


def check_matches(card: dict, model, where) -> None:
    cfg = model.config
    vocab = int(model.get_output_embeddings().out_features)
    problems = []
    if card.get("hidden_size") != int(cfg.hidden_size):
        problems.append(f"hidden size {card.get('hidden_size')} vs the model's {cfg.hidden_size}")
    if card.get("vocab_size") != vocab:
        problems.append(f"vocabulary {card.get('vocab_size')} vs the model's {vocab}")
    if card.get("config_hash") != config_hash(cfg):
        problems.append("the model's configuration differs (config hash)")
    if problems:
        raise UserError(
            f"The drafter in {where} was trained for '{card.get('base_model')}' and does not fit "
            f"this model: {'; '.join(problems)}"
        )

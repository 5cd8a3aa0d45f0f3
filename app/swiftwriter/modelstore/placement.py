"""Where a model's weights and KV cache live: one device (`cpu`, `cuda:N`, `mps`), or spread by
accelerate (`device_map="auto"`) over GPUs, the CPU and disk within per-device memory limits.

`parse_max_memory` reads the CLI's `cuda:0=20GiB,cpu=64GiB`; `estimate` says what a model and
its KV cache at a given context need, per device, before anything is loaded (the Models dialog
and the refusal when a context does not fit both use it). Nothing here imports torch at module
level: the store and the dialogs can ask for estimates cheaply."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from swiftwriter.cpuinfo import cpu_flags
from swiftwriter.errors import UserError
from swiftwriter.modelstore.gguf_weights import STORED  # a GGUF's blocks: no bytes a weight

_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_DEVICE = re.compile(r"^(cpu|disk|mps|cuda:\d+|\d+)$")
_ONE_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def parse_size(text: str) -> int:
    """'20GiB', '512MB', '1.5GiB', '1000000' -> bytes."""
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else ""
    if match is None or (unit and unit not in _UNITS):
        raise UserError(f"'{text}' is not a memory size: write it as 20GiB, 512MiB or 8GB")
    size = int(float(match.group(1)) * _UNITS.get(unit, 1))
    if size <= 0:
        raise UserError(f"A memory limit must be above zero, not '{text}'")
    return size


def parse_max_memory(text: str) -> dict[int | str, int]:
    """'cuda:0=20GiB,cpu=64GiB' -> {0: bytes, 'cpu': bytes} (accelerate's keys: GPU index,
    'cpu', 'mps', 'disk')."""
    out: dict[int | str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        device, sep, size = part.partition("=")
        device = device.strip().lower()
        if not sep or not _DEVICE.match(device):
            raise UserError(
                f"'{part}' is not DEVICE=SIZE: use cpu, disk, mps or cuda:N, e.g. cuda:0=20GiB"
            )
        key: int | str = int(device.removeprefix("cuda:")) if device[-1].isdigit() else device
        if key in out:
            raise UserError(f"{device} is given twice in --max-memory")
        out[key] = parse_size(size)
    if not out:
        raise UserError("--max-memory is empty: give at least one DEVICE=SIZE")
    return out


def check_device(device: str) -> str:
    """A device a model runs on: auto, cpu, cuda, cuda:N or mps. Anything else torch knows
    (its `meta` device holds no values, `xpu` and the like are untried) is refused here, in
    one line, before anything loads."""
    if not _ONE_DEVICE.match(device):
        raise UserError(f"The device is auto, cpu, cuda, cuda:N or mps, not '{device}'")
    return device


@dataclass
class Placement:
    """One device, or accelerate's map (`device_map="auto"`) within `max_memory`, offloading
    what does not fit to `offload_folder`."""

    device: str = "auto"
    device_map: str | None = None  # "auto" spreads the model
    max_memory: dict[int | str, int] = field(default_factory=dict)
    offload_folder: str | None = None

    def __post_init__(self):
        check_device(self.device)
        if self.device_map not in (None, "auto"):
            raise UserError(f"--device-map is 'auto' or absent, not {self.device_map!r}")
        if self.max_memory and self.device_map is None:
            raise UserError("--max-memory goes with --device-map auto")

    @property
    def spread(self) -> bool:
        return self.device_map == "auto"


def stored_cache_dtype(flags: str | None = None) -> str:
    """The KV cache's dtype for a GGUF's blocks as stored: bfloat16 where the CPU has AVX-512
    BF16 (the attention's bfloat16 pairs kernel: engine/passes/leanpass.py _attention_dtype),
    else float32, as the activations."""
    flags = cpu_flags() if flags is None else flags
    return "bfloat16" if "avx512_bf16" in flags.split() else "float32"


def kv_bytes_per_token(config, dtype: str) -> int:
    """Keys and values of one token over all layers."""
    layers = config.num_hidden_layers
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return 2 * layers * heads * head_dim * DTYPE_BYTES[dtype]


def module_bytes(config, dtype: str) -> dict[str, int]:
    """Bytes per block as accelerate places them: each decoder layer ('model.layers.3') and
    the modules beside the layers ('model.embed_tokens', 'model.norm', 'lm_head'), counted on
    an empty (meta) copy of the model: no weights load, and none is even allocated (plain
    init_empty_weights allocates each weight before moving it to meta, which a config larger
    than the machine's memory makes fail)."""
    import torch  # lazy: torch
    from accelerate.utils import compute_module_sizes  # lazy: accelerate
    from transformers import AutoModelForCausalLM  # lazy: transformers

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    sizes = compute_module_sizes(model, dtype=getattr(torch, dtype))
    blocks: dict[str, int] = {}
    for name, child in model.named_children():
        inner = dict(child.named_children())
        if isinstance(inner.get("layers"), torch.nn.ModuleList):
            for sub in inner:
                if sub == "layers":
                    for i in range(len(inner["layers"])):
                        blocks[f"{name}.layers.{i}"] = sizes.get(f"{name}.layers.{i}", 0)
                else:
                    blocks[f"{name}.{sub}"] = sizes.get(f"{name}.{sub}", 0)
        else:
            blocks[name] = sizes.get(name, 0)
    if getattr(config, "tie_word_embeddings", False) and "lm_head" in blocks:
        blocks["lm_head"] = 0  # shares the embedding's weight
    return blocks


@dataclass
class Estimate:
    """What a model needs at `context` tokens: bytes per device for weights and KV cache."""

    context: int
    dtype: str
    weights: dict[str, int]
    kv: dict[str, int]

    def total(self, device: str | None = None) -> int:
        devices = [device] if device else set(self.weights) | set(self.kv)
        return sum(self.weights.get(d, 0) + self.kv.get(d, 0) for d in devices)

    def lines(self) -> list[str]:
        out = []
        for device in sorted(set(self.weights) | set(self.kv), key=str):
            out.append(
                f"{device}: {fmt_bytes(self.weights.get(device, 0))} weights + "
                f"{fmt_bytes(self.kv.get(device, 0))} KV cache"
            )
        return out


def estimate(
    config, dtype: str, context: int, device_map: dict[str, str] | None = None
) -> Estimate:
    """Memory for the weights and a KV cache of `context` tokens, per device: all on one
    device when `device_map` is None ('device'), else split as the map places the blocks
    (each decoder layer's KV cache lives with the layer; disk-offloaded layers keep theirs on
    the CPU)."""
    per_token = kv_bytes_per_token(config, dtype) // config.num_hidden_layers
    blocks = module_bytes(config, dtype)
    if device_map is None:
        kv_all = per_token * context * config.num_hidden_layers
        return Estimate(context, dtype, {"device": sum(blocks.values())}, {"device": kv_all})
    weights: dict[str, int] = {}
    kv: dict[str, int] = {}
    for name, size in blocks.items():
        if size == 0 and _device_of(name, device_map, None) is None:
            continue  # no weights (a rotary table): accelerate need not place it
        device = str(_device_of(name, device_map))
        weights[device] = weights.get(device, 0) + size
        if ".layers." in name:
            home = "cpu" if device == "disk" else device
            kv[home] = kv.get(home, 0) + per_token * context
    return Estimate(context, dtype, weights, kv)


_MISSING = object()


def _device_of(name: str, device_map: dict, default=_MISSING):
    """The device accelerate gives a block: its own entry or its nearest listed ancestor's."""
    parts = name.split(".")
    for i in range(len(parts), -1, -1):
        key = ".".join(parts[:i])
        if key in device_map:
            return device_map[key]
    if default is _MISSING:
        raise UserError(f"The device map does not place {name}")
    return default


def fmt_bytes(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def plan_device_map(config, dtype: str, max_memory: dict[int | str, int], context: int) -> dict:
    """accelerate's map of the model's blocks over the devices in `max_memory`, with room kept
    on each device for a KV cache of `context` tokens (as if every layer lived there: a safe
    bound), and what does not fit offloaded to disk. Refused, saying what is needed, when a
    device cannot even hold that cache."""
    import torch  # lazy: torch
    from accelerate import init_empty_weights  # lazy: accelerate
    from accelerate.utils import infer_auto_device_map  # lazy: accelerate
    from transformers import AutoModelForCausalLM  # lazy: transformers

    kv = kv_bytes_per_token(config, dtype) * context
    limits: dict[int | str, int] = {}
    for device, limit in max_memory.items():
        if device == "disk":
            continue
        if limit <= kv:
            raise UserError(
                f"{_name(device)}={fmt_bytes(limit)} cannot hold the KV cache of {context:,} tokens "
                f"({fmt_bytes(kv)}) and any weights: give it more than {fmt_bytes(kv)} or ask for "
                "fewer tokens"
            )
        limits[device] = limit - kv
    limits["disk"] = max_memory.get("disk", 1 << 50)
    with init_empty_weights():
        model = AutoModelForCausalLM.from_config(config)
    model.tie_weights()  # a tied lm_head stays with its embedding
    return infer_auto_device_map(
        model,
        max_memory=limits,
        no_split_module_classes=list(getattr(model, "_no_split_modules", None) or []),
        dtype=getattr(torch, dtype),
    )


def _name(device: int | str) -> str:
    return f"cuda:{device}" if isinstance(device, int) else str(device)


def describe(
    folder, device: str, dtype: str, context: int, max_memory: str = "",
    gguf_bytes: int | None = None,
) -> str:  # fmt: skip
    """The Models dialog's estimate for a model folder, in a few lines: what the weights and
    a KV cache of `context` tokens need on each device, or why the placement cannot work.
    `gguf_bytes`: the size of the GGUF file a "stored" model computes from."""
    from transformers import AutoConfig  # lazy: transformers

    if dtype == STORED:
        return _describe_stored(folder, device, context, gguf_bytes)
    dtype = dtype if dtype in DTYPE_BYTES else "bfloat16"  # "auto": bf16 or the like
    try:
        config = AutoConfig.from_pretrained(folder, local_files_only=True)
        device_map = None
        if device == "spread" and max_memory:
            device_map = plan_device_map(config, dtype, parse_max_memory(max_memory), context)
        est = estimate(config, dtype, context, device_map)
    except UserError as exc:
        return str(exc)
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        return f"No estimate for this model: {exc}"
    where = "spread by accelerate" if device == "spread" else device
    head = f"{dtype}, {context:,} tokens of context, {where}: {fmt_bytes(est.total())} in all"
    lines = (
        est.lines()
        if device_map is not None
        else [
            f"{fmt_bytes(est.weights['device'])} weights + {fmt_bytes(est.kv['device'])} KV cache"
        ]
    )
    return "\n".join([head, *lines])


def _describe_stored(folder, device: str, context: int, gguf_bytes: int | None) -> str:
    """A GGUF's blocks as stored: the file's bytes and a KV cache in `stored_cache_dtype`, on the
    CPU alone (it was once described as bfloat16 weights, twice to four times the file)."""
    from transformers import AutoConfig  # lazy: transformers

    if gguf_bytes is None:
        return "Only a GGUF model's weights run as stored: choose another precision"
    if device != "cpu":
        return "GGUF weights run as stored on the CPU alone: choose the device cpu or auto"
    try:
        config = AutoConfig.from_pretrained(folder, local_files_only=True)
        kv = kv_bytes_per_token(config, stored_cache_dtype()) * context
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        return f"No estimate for this model: {exc}"
    head = f"{STORED}, {context:,} tokens of context, cpu: {fmt_bytes(gguf_bytes + kv)} in all"
    return f"{head}\n{fmt_bytes(gguf_bytes)} weights (the GGUF file) + {fmt_bytes(kv)} KV cache"

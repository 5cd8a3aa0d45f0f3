"""A lean decoder forward for our verification passes on the decoder families writers use.

A pass of one to a few tokens on a CPU is bound by streaming the weights from memory; the rest
was transformers' per-layer machinery: module calls, kwargs, rotary tables rebuilt per layer,
the attention interface and a GQA copy of the keys and values. This walks the same modules'
weights in a few tensor ops per layer, q/k/v and gate/up read through merged weights when
`merge_projections` has laid them out (views into one tensor per layer: no extra memory; the
modules see the same values).

Two forwards: the batch-invariant one (the default, `forward_invariant`): each row computed as
the one-token pass computes it, whatever else the pass holds (invariant.py), so speculation
writes plain decoding's text in every dtype; and the earlier one (`invariant=False`, Llama's
layer without a window only): the stock RMSNorm op sequence, the model's own rotary embedding
and SDPA, the fastest kernels for each pass size, equal to the stock forward but rounding a
tree row differently from a one-token pass.

The families differ in a few places, each described once (`Family`, `describe`) rather than
in a forward per family: where the norms sit (before each block; after it, OLMo 2; both,
Gemma), how a norm rounds, q/k norms per head (Qwen3, Gemma 3) or over the whole projection
(OLMo 2), fused projections (Phi-3), Granite's multipliers, Gemma's attention soft-capping,
sliding-window layers (Mistral, Gemma, Qwen) and a rotary table per layer type (Gemma 3).
Anything else (another architecture, accelerate's offloading hooks, dynamic NTK rotary
scaling) keeps transformers' own forward (backends.py), and the run says it may differ from
plain decoding."""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers import DynamicCache

from swiftwriter.engine.passes import invariant as invariant_mod
from swiftwriter.engine.passes import kernels, native, quant
from swiftwriter.engine.passes.modelstate import settings_for
from swiftwriter.engine.passes.quant import QuantLinear, QuantWeight


@dataclass(frozen=True)
class Family:
    """How one decoder family's layer differs from Llama's (read in transformers' modeling
    files): `blocks` "pre" (a norm before attention and MLP), "post" (OLMo 2: after each, none
    before) or "sandwich" (Gemma: before and after each); `qk_norm` None, "head" (per head
    before the rotary: Qwen3, Gemma 3) or "whole" (over the projection: OLMo 2); `norm` how
    its RMSNorm rounds ("llama": weight * x.to(dtype); "olmo": (weight * x).to(dtype);
    "gemma": (x * (1 + weight)).to(dtype), in float32); `fused` q/k/v and gate/up as one
    module each (Phi-3); `multipliers` Granite's; `softcap` Gemma 2's attention logits;
    `config_window` a config's `sliding_window` holds for every layer (Mistral, Phi-3; the
    others say per layer in `layer_types`)."""

    blocks: str = "pre"
    qk_norm: str | None = None
    norm: str = "llama"
    fused: bool = False
    multipliers: bool = False
    softcap: bool = False
    config_window: bool = False

    @property
    def plain(self) -> bool:
        """Exactly Llama's layer: the earlier, non-invariant forward serves it too."""
        return self == Family() or self == Family(config_window=True)


_FAMILIES = {
    "LlamaDecoderLayer": Family(),
    "Qwen2DecoderLayer": Family(),
    "MistralDecoderLayer": Family(config_window=True),
    "Qwen3DecoderLayer": Family(qk_norm="head"),
    "GraniteDecoderLayer": Family(multipliers=True),
    "Phi3DecoderLayer": Family(fused=True, config_window=True),
    "Olmo2DecoderLayer": Family(blocks="post", qk_norm="whole", norm="olmo"),
    "Gemma2DecoderLayer": Family(blocks="sandwich", norm="gemma", softcap=True),
    "Gemma3DecoderLayer": Family(blocks="sandwich", qk_norm="head", norm="gemma"),
}
# the RMSNorm classes of those families, by how they round
_NORMS = {
    "llama": {"LlamaRMSNorm", "Qwen2RMSNorm", "MistralRMSNorm", "Qwen3RMSNorm", "GraniteRMSNorm",
              "Phi3RMSNorm"},
    "olmo": {"Olmo2RMSNorm"},
    "gemma": {"Gemma2RMSNorm", "Gemma3RMSNorm"},
}  # fmt: skip
# activations that act on each element alone (a row's values never depend on the others')
_ACTIVATIONS = {"SiLUActivation", "SiLU", "GELUTanh", "PytorchGELUTanh"}
_WINDOW_KINDS = {"full_attention", "sliding_attention"}


def _rms(x: torch.Tensor, norm: nn.Module) -> torch.Tensor:
    """transformers' LlamaRMSNorm, op for op (so the values are the stock ones)."""
    return invariant_mod.rms(x, norm.weight, norm.variance_epsilon)


def _norm(kind: str, x: torch.Tensor, norm: nn.Module) -> torch.Tensor:
    """The family's RMSNorm op for op (`Family.norm`), over the last dimension."""
    if kind == "llama":
        return invariant_mod.rms(x, norm.weight, norm.variance_epsilon)
    eps = norm.variance_epsilon if kind == "olmo" else norm.eps
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    if kind == "olmo":
        return (norm.weight * h).to(x.dtype)
    return (h * (1.0 + norm.weight.float())).to(x.dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _linear(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return module.forward(x)  # no hooks on these modules (checked in `supports`)


class Merged:
    """Projections that read one input, laid out as one weight: `cols` is [in, out] (the fast
    layout from four rows up), `rows` the stock [out, in] copy for passes of <= `few_rows`
    rows when the model keeps one (layout.FewRowLinear); the modules' own weights become views
    into these, so the model holds no second copy."""

    def __init__(self, modules: list[nn.Linear]):
        self.sizes = [m.weight.shape[0] for m in modules]
        with torch.no_grad():
            self.cols = torch.cat([m.weight.detach().t() for m in modules], dim=1).contiguous()
            rows = [getattr(m, "weight_rows", None) for m in modules]
            self.few_rows = (
                getattr(modules[0], "few_rows", 0) if all(r is not None for r in rows) else 0
            )
            self.rows = torch.cat(rows, dim=0) if self.few_rows else None
            biases = [m.bias for m in modules]
            self.bias = (
                torch.cat([b.detach() for b in biases])
                if all(b is not None for b in biases)
                else None
            )
            start = 0
            for m, size in zip(modules, self.sizes, strict=True):
                end = start + size
                m.weight = nn.Parameter(self.cols[:, start:end].t(), requires_grad=False)
                if self.rows is not None:
                    m.weight_rows = self.rows[start:end]
                if self.bias is not None:
                    m.bias = nn.Parameter(self.bias[start:end], requires_grad=False)
                start = end

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.rows is not None and x.shape[0] <= self.few_rows:
            return F.linear(x, self.rows, self.bias)
        return self.wide(x)

    def wide(self, x: torch.Tensor) -> torch.Tensor:
        """The [in, out] product whatever the row count (a batch-invariant pass uses one layout
        only, two layouts being two kernels: this one, or the [out, in] copy when kept)."""
        out = x @ self.cols
        return out if self.bias is None else out + self.bias


class QuantMerged:
    """Stored-block projections that read one input, as one weight: the modules' own weights
    become slices of it (whole tiles of 16 rows), so nothing is held twice."""

    def __init__(self, modules: list[QuantLinear]):
        self.sizes = [m.out_features for m in modules]
        self.weight = QuantWeight.join([m.qweight for m in modules])
        biases = [m.bias for m in modules]
        self.bias = (
            torch.cat([b.detach() for b in biases]) if all(b is not None for b in biases) else None
        )
        start = 0
        for m in modules:
            tiles = m.qweight.packed.shape[0]
            m.qweight = QuantWeight(
                self.weight.packed[start : start + tiles], m.qweight.qtype, m.qweight.n, m.qweight.k
            )
            start += tiles

    @staticmethod
    def joinable(modules) -> bool:
        first = modules[0]
        return all(
            isinstance(m, QuantLinear)
            and m.qweight.qtype == first.qweight.qtype
            and m.in_features == first.in_features
            and m.out_features % 16 == 0
            for m in modules
        )

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight.linear(x, self.bias).to(x.dtype)


def _merged(modules):
    """One weight for projections that read one input: float ones as `Merged`, stored blocks
    as `QuantMerged`; None when they cannot be joined (mixed types, partial tiles)."""
    if all(isinstance(m, nn.Linear) for m in modules):
        return Merged(modules)
    return QuantMerged(modules) if QuantMerged.joinable(modules) else None


def merge_projections(model) -> int:
    """Lay each supported layer's q/k/v and gate/up weights out as one tensor each (values
    unchanged); returns how many layers were merged. Only for `supports(model)` models."""
    if not supports(model):
        return 0
    merged = 0
    if describe(model).fused:  # already one tensor each
        return 0
    for layer in model.get_decoder().layers:
        attn, mlp = layer.self_attn, layer.mlp
        if getattr(attn, "sw_qkv", None) is not None:
            continue
        if any(p.device.type != "cpu" or p.is_meta for p in layer.parameters()):
            continue
        qkv = _merged([attn.q_proj, attn.k_proj, attn.v_proj])
        gate_up = _merged([mlp.gate_proj, mlp.up_proj])
        if qkv is not None:
            attn.sw_qkv = qkv
        if gate_up is not None:
            mlp.sw_gate_up = gate_up
        merged += qkv is not None or gate_up is not None
    return merged


def supports(model) -> bool:
    """True when the lean forward computes exactly what this model's decoder computes."""
    return describe(model) is not None


def describe(model) -> Family | None:
    """The model's `Family` when the lean forward computes what its decoder computes, else
    None (checked per run: a hook added since would stop firing in the lean forward)."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    layers = getattr(decoder, "layers", None)
    if decoder is None or layers is None or len(layers) == 0:
        return None
    names = {type(layer).__name__ for layer in layers}
    family = _FAMILIES.get(names.pop()) if len(names) == 1 else None
    if family is None:
        return None
    config = _config(model)
    kinds = getattr(config, "layer_types", None)
    if kinds and any(kind not in _WINDOW_KINDS for kind in kinds[: len(layers)]):
        return None
    if getattr(config, "use_bidirectional_attention", False):
        return None
    if any(getattr(m, "_hf_hook", None) is not None for m in model.modules()):
        return None
    if any(m._forward_hooks or m._forward_pre_hooks for m in decoder.modules()):
        return None
    if getattr(decoder, "rotary_emb", None) is None or getattr(decoder, "norm", None) is None:
        return None
    if _by_kind(decoder.rotary_emb) and not kinds:  # a rotary per layer type, types unknown
        return None
    norms = _NORMS[family.norm]
    for layer in layers:
        attn, mlp = layer.self_attn, layer.mlp
        wanted = (
            ("qkv_proj", "o_proj") if family.fused else ("q_proj", "k_proj", "v_proj", "o_proj")
        )
        wanted += (
            ("gate_up_proj", "down_proj") if family.fused else ("gate_proj", "up_proj", "down_proj")
        )
        if any(not isinstance(_module(layer, name), (nn.Linear, QuantLinear)) for name in wanted):
            return None
        act = getattr(mlp, "act_fn", None) or getattr(mlp, "activation_fn", None)
        if type(act).__name__ not in _ACTIVATIONS:
            return None
        named = [n for n in _layer_norms(family) if type(getattr(layer, n, None)).__name__ in norms]
        if len(named) != len(_layer_norms(family)):
            return None
        if family.qk_norm and any(
            type(getattr(attn, n, None)).__name__ not in norms for n in ("q_norm", "k_norm")
        ):
            return None
    if type(decoder.norm).__name__ not in norms:
        return None
    return family


def _config(model):
    """The decoder's own config (a multimodal model's text config; the model's otherwise)."""
    decoder = model.get_decoder()
    return getattr(decoder, "config", None) or model.config


def _by_kind(rotary) -> bool:
    """Whether the rotary embedding takes the layer type (Gemma 3: one table per type)."""
    return "layer_type" in inspect.signature(rotary.forward).parameters


def _module(layer, name: str):
    return getattr(layer.self_attn, name, None) or getattr(layer.mlp, name, None)


def _layer_norms(family: Family) -> tuple[str, ...]:
    if family.blocks == "post":
        return ("post_attention_layernorm", "post_feedforward_layernorm")
    if family.blocks == "sandwich":
        return (
            "input_layernorm",
            "post_attention_layernorm",
            "pre_feedforward_layernorm",
            "post_feedforward_layernorm",
        )
    return ("input_layernorm", "post_attention_layernorm")


def windows(model) -> list[int | None]:
    """Each layer's sliding window (None: full attention), as transformers' masks apply it."""
    config, count = _config(model), len(model.get_decoder().layers)
    window = getattr(config, "sliding_window", None) or None
    kinds = getattr(config, "layer_types", None)
    if kinds:
        return [window if kind == "sliding_attention" else None for kind in kinds[:count]]
    family = _FAMILIES.get(type(model.get_decoder().layers[0]).__name__)
    return [window if family is not None and family.config_window else None] * count


def _rope_splits(model) -> dict | None:
    """{layer type or None: positions a table computation must not straddle} for the
    decoder's rotary embedding, or None when a position's values are not fixed: dynamic NTK
    scaling rescales every position as the text grows. Longrope switches all of a call's
    positions to its long factors when the call reaches `original_max_position_embeddings`:
    a one-token pass at position p uses them from that position on, so the table is computed
    in two calls split there and each position gets the one-token pass's values."""
    rotary = model.get_decoder().rotary_emb
    rope = getattr(rotary, "rope_type", "default")
    kinds = dict(rope) if isinstance(rope, dict) else {None: rope}
    params = getattr(getattr(rotary, "config", None), "rope_parameters", None) or {}
    out = {}
    for key, kind in kinds.items():
        if "dynamic" in str(kind):
            return None
        if "longrope" not in str(kind):
            out[key] = ()
            continue
        own = params.get(key, {}) if key is not None else params
        limit = own.get("original_max_position_embeddings") if isinstance(own, dict) else None
        if not isinstance(limit, int) or limit <= 0:
            return None
        out[key] = (limit,)
    return out


def fixed_rotary(model) -> bool:
    """Whether each position's rotary values are fixed, so a table per position gives every
    pass the one-token pass's values (`_rope_splits`)."""
    return _rope_splits(model) is not None


def _plain(module: nn.Module, kernel: str = kernels.STOCK):
    """A Linear module as one product on one layout whatever the row count: on the stock
    kernel the [out, in] copy where the model keeps one (layout.FewRowLinear: there it is the
    faster layout for a single row), else the module's weight. Returns (fn, weight [out, in])."""
    if isinstance(module, QuantLinear):  # its own kernel, row-invariant by construction
        return module.forward, None
    weight = getattr(module, "weight_rows", None) if kernel == kernels.STOCK else None
    weight = module.weight if weight is None else weight
    fn, bias = kernels.product(kernel), module.bias
    return (lambda x: fn(x, weight, bias)), weight


def _one_layout(merged, kernel: str = kernels.STOCK):
    if isinstance(merged, QuantMerged):
        return merged, None
    if kernel != kernels.STOCK:
        fn, weight = kernels.product(kernel), merged.cols.t()
        return (lambda x: fn(x, weight, merged.bias)), weight
    if merged.rows is not None:
        return (lambda x: F.linear(x, merged.rows, merged.bias)), merged.rows
    return merged.wide, merged.cols.t()


def _joined(modules: list[nn.Module], kernel: str = kernels.STOCK):
    """Separate projections of one input, their outputs side by side (models not merged)."""
    parts = [_plain(m, kernel) for m in modules]
    fn = lambda x: torch.cat([f(x) for f, _ in parts], dim=-1)  # noqa: E731
    weights = [w for _, w in parts]
    return fn, None if any(w is None for w in weights) else torch.cat(weights)


class LayerProjections:
    """One decoder layer's products for the batch-invariant pass, one kernel layout each."""

    def __init__(self, layer, kernel: str = kernels.STOCK):
        attn, mlp = layer.self_attn, layer.mlp
        if getattr(attn, "qkv_proj", None) is not None:  # fused (Phi-3)
            qkv, gate_up = _plain(attn.qkv_proj, kernel), _plain(mlp.gate_up_proj, kernel)
            self.probes = (qkv, _plain(attn.o_proj, kernel), gate_up, _plain(mlp.down_proj, kernel))
            self.qkv, self.o, self.gate_up, self.down = (fn for fn, _ in self.probes)
            return
        merged = getattr(attn, "sw_qkv", None)
        qkv = (
            _one_layout(merged, kernel)
            if merged is not None
            else _joined([attn.q_proj, attn.k_proj, attn.v_proj], kernel)
        )
        merged = getattr(mlp, "sw_gate_up", None)
        gate_up = (
            _one_layout(merged, kernel)
            if merged is not None
            else _joined([mlp.gate_proj, mlp.up_proj], kernel)
        )
        self.probes = (qkv, _plain(attn.o_proj, kernel), gate_up, _plain(mlp.down_proj, kernel))
        self.qkv, self.o, self.gate_up, self.down = (fn for fn, _ in self.probes)


_CLASSES: dict = {}  # (id(model), dtype, device, kernel) -> (model ref, RowClasses)
ANY_ROWS = 1 << 16  # a row class without an upper bound


def row_classes(model) -> invariant_mod.RowClasses:
    """The row counts one kernel serves for all of this model's products (measured once per
    model object and dtype: a second or two for the default model)."""
    dtype, device = compute_dtype(model), compute_device(model)
    kernel = kernels.kernel_of(model)
    key = (id(model), dtype, device.type, kernel)
    found = _CLASSES.get(key)
    if found is not None and found[0]() is model:
        return found[1]
    proj = LayerProjections(model.get_decoder().layers[0], kernel)
    head = _plain(model.get_output_embeddings(), kernel)
    # products on stored blocks give a row the same bits for any row count (quant.py): only
    # float ones are measured
    probes = [p for p in (*proj.probes, head) if p[1] is not None]
    classes = (
        invariant_mod.measure_classes(probes) if probes else invariant_mod.RowClasses(1, ANY_ROWS)
    )
    _CLASSES[key] = (weakref.ref(model), classes)
    return classes


def use_tree_attention(model, enabled: bool) -> None:
    """Whether `model`'s batch-invariant passes may use the native tree-attention kernel
    (default: yes where it builds); read when a LeanDecoder is set up for the model."""
    settings_for(model).tree_attention = enabled


def _attention_dtype(model, head_dim: int, tree_attention) -> torch.dtype:
    """The dtype a model's keys and values are cached and attended in: its activations', but
    bfloat16 for a model on stored blocks where the bfloat16 pairs kernel runs. Why: with float32
    activations a pass after 1,000 cached tokens spent as long reading the float32 cache as on
    all its weight products (the cache is read once per row group, every step), and each extra
    row paid float32 score and value sums; bfloat16 pairs halve both. llama.cpp caches keys and
    values in 16 bits too. Every pass takes the same dtype, so a row is still its own."""
    dtype = compute_dtype(model)
    stored = dtype == torch.float32 and quant.quantized_model(model)
    if stored and tree_attention is not None and native.pair_keys(torch.bfloat16, head_dim):
        return torch.bfloat16
    return dtype


def compute_dtype(model) -> torch.dtype:
    """The dtype the decoder's activations are in: its final norm's (a model on stored blocks
    has no float weight to read it from)."""
    norm = getattr(model.get_decoder(), "norm", None)
    weight = getattr(norm, "weight", None)
    if isinstance(weight, torch.Tensor):
        return weight.dtype
    return next(p for p in model.parameters() if p.is_floating_point()).dtype


def compute_device(model) -> torch.device:
    norm = getattr(model.get_decoder(), "norm", None)
    weight = getattr(norm, "weight", None)
    return weight.device if isinstance(weight, torch.Tensor) else next(model.parameters()).device


def _tree_attention(model, head_dim: int):
    """The native kernel for this model's passes, or None for PyTorch's attention: CPU
    weights and a head size up to 256 (the kernel's limit)."""
    if not settings_for(model).tree_attention:
        return None
    if compute_device(model).type != "cpu" or head_dim > 256:
        return None
    if compute_dtype(model) not in (torch.float32, torch.bfloat16, torch.float16):
        return None
    return native.tree_attention()


@dataclass
class Part:
    """One generation's rows in a pass: how many, its KV cache, its attention plan
    (`path_tables`, built before the pass writes to the cache)."""

    n: int
    cache: DynamicCache  # the generation's, of kvcache.GrowingLayer
    paths: Callable[[str], object]
    # its first `shared` cache slots hold the same keys as the first part's (the prompt the
    # runs share), read from there once for all parts (native forest kernel); 0: none
    shared: int = 0


class ForestPlan:
    """A forest pass's kernel arguments that no layer changes: each part's rows, prefix and
    path table, the tables' paths padded to one depth and joined."""

    def __init__(self, parts: list[Part]):
        self.parts = parts
        tables = [part.paths("tiles") for part in parts]
        depth = max(t.paths.shape[1] for t in tables)
        self.paths = torch.cat([F.pad(t.paths, (0, depth - t.paths.shape[1])) for t in tables])
        self.lengths = torch.cat([t.lengths for t in tables])
        self.prefixes = [t.prefix for t in tables]
        self.counts = [part.n for part in parts]
        self.one_row_each = all(n == 1 for n in self.counts)
        starts = [sum(self.counts[:i]) for i in range(len(parts))]
        self.rows = [slice(s, s + n) for s, n in zip(starts, self.counts, strict=True)]


def path_tables(allowed, n: int, prefix: int):
    """paths(kind): the pass's attention plan, "tiles" (the native kernel's) or "plan"
    (PyTorch's), each built the first time a layer asks for it."""
    built: dict = {}

    def paths(kind: str):
        if kind not in built:
            table = invariant_mod.PathTable if kind == "tiles" else invariant_mod.PathPlan
            built[kind] = table(allowed, n, prefix)
        return built[kind]

    return paths


class LeanDecoder:
    """The decoder's forward for a verification pass over `n` tokens (a flattened trie).
    `invariant` (the default) makes every row's result independent of the pass's other rows
    (invariant.py); off, a pass takes the fastest kernels for its size (the earlier path,
    Llama's layer only: `Family.plain`)."""

    def __init__(self, model, invariant: bool = True):
        self.decoder = model.get_decoder()
        self.layers = list(self.decoder.layers)
        self.family = describe(model) or Family()
        config = _config(model)
        attn = self.layers[0].self_attn
        self.head_dim = attn.head_dim
        self.groups = attn.num_key_value_groups
        self.kv_heads = config.num_key_value_heads
        self.heads = self.kv_heads * self.groups
        self.scaling = attn.scaling
        self.softcap = (
            getattr(attn, "attn_logit_softcapping", None) if self.family.softcap else None
        )
        self.windows = windows(model)
        # each layer's activation, called without the module machinery (no hooks: `describe`)
        self.acts = [
            (getattr(layer.mlp, "act_fn", None) or layer.mlp.activation_fn).forward
            for layer in self.layers
        ]
        multipliers = self.family.multipliers
        self.embedding_multiplier = config.embedding_multiplier if multipliers else None
        self.residual_multiplier = config.residual_multiplier if multipliers else None
        # a rotary table per position needs frequencies that do not change with the length
        self.invariant = invariant and fixed_rotary(model)
        self.tree_attention = None  # the native kernel, for the invariant passes only
        self.forest_attention = None  # its several-part call (runs written together)
        self.append_rows = native.append_rows()
        self.append_bf16 = native.append_bf16()
        self._plan: ForestPlan | None = None
        self.pair_keys = False  # whether it reads the keys as bfloat16 pairs
        self.attention_dtype = compute_dtype(model)  # the cached keys' and values' dtype
        self.fused = None  # a stored-block model's layers in two native calls each
        if self.invariant:
            kernel = kernels.kernel_of(model)
            self.classes = row_classes(model)
            self.product = kernels.product(kernel)  # also the lm_head's (verify.py)
            self.projections = [LayerProjections(layer, kernel) for layer in self.layers]
            self.tree_attention = _tree_attention(model, self.head_dim)
            self.attention_dtype = _attention_dtype(model, self.head_dim, self.tree_attention)
            if self.tree_attention is not None and self.attention_dtype == torch.float32:
                self.forest_attention = native.forest_attention()
            self.pair_keys = self.tree_attention is not None and native.pair_keys(
                self.attention_dtype, self.head_dim
            )
            self._rotaries(model)
            self.fused = FusedLayers.of(self, model)

    def _rotaries(self, model) -> None:
        """One per-position table per rotary kind (Gemma 3: sliding and full layers have their
        own), and each layer's."""
        rotary = self.decoder.rotary_emb
        config_hidden = _config(model).hidden_size
        like = torch.zeros(
            1, 1, config_hidden, dtype=compute_dtype(model), device=compute_device(model)
        )
        config = _config(model)
        length = min(getattr(config, "max_position_embeddings", 0) or 4096, 1 << 17)
        kinds = getattr(config, "layer_types", None) or [None] * len(self.layers)
        by_kind = _by_kind(rotary)
        tables: dict = {}
        splits = _rope_splits(model)
        self.layer_rotary = []
        for kind in kinds[: len(self.layers)]:
            key = kind if by_kind else None
            if key not in tables:
                fn = (lambda x, p, k=key: rotary(x, p, k)) if by_kind else rotary
                table = invariant_mod.RotaryTable(fn, like, length, splits.get(key, ()))
                tables[key] = invariant_mod.Rotary(table)
            self.layer_rotary.append(tables[key])
        self.rotaries = list(tables.values())
        self.rotary = self.rotaries[0]

    def _attend(self, index, q, k, v, layer_cache, paths) -> torch.Tensor:
        """One layer's attention for the pass's rows: the native kernel where it applies, else
        per row in PyTorch (invariant.py). A row is decided by its own key count alone, as its
        one-token pass decides: in a sliding-window layer the kernel takes the rows whose keys
        all fit in the window (the window changes nothing for them), PyTorch the longer ones;
        Gemma 2's soft-capped attention is PyTorch's."""
        window, kernel = self.windows[index], self.tree_attention
        if kernel is None or self.softcap is not None:
            return invariant_mod.attend_paths(
                q, k, v, layer_cache, paths("plan"), self.scaling, window, self.softcap
            )
        table = paths("tiles")
        if window is None or table.prefix + int(table.lengths.max()) <= window:
            return invariant_mod.attend_tiles(
                q, layer_cache, table, self.scaling, kernel, self.pair_keys
            )
        cut = invariant_mod.attend_paths(q, k, v, layer_cache, paths("plan"), self.scaling, window)
        fits = table.prefix + table.lengths <= window
        if not bool(fits.any()):
            return cut
        whole = invariant_mod.attend_tiles(
            q, layer_cache, table, self.scaling, kernel, self.pair_keys
        )
        return torch.where(fits[:, None].to(cut.device), whole, cut)

    def _attend_parts(self, index: int, q, k, v, parts: list[Part]) -> torch.Tensor:
        """One layer's attention for a pass that may hold several generations' tries (parts,
        rows side by side): each part's keys and values go to its own cache and its rows
        attend there alone, so a row's result is what a pass over its part alone computes."""
        if q.dtype != self.attention_dtype:  # stored blocks: a bfloat16 cache (_attention_dtype)
            quick = self._attend_bf16(index, q, k, v, parts)
            if quick is not None:
                return quick
            dtype = self.attention_dtype
            out = self._attend_parts(index, q.to(dtype), k.to(dtype), v.to(dtype), parts)
            return out.to(q.dtype)
        if len(parts) == 1:
            part = parts[0]
            layer_cache = part.cache.layers[index]
            layer_cache.append(k, v)
            return self._attend(index, q, k, v, layer_cache, part.paths)
        if self._forest(index, parts):
            return self._attend_forest(index, q, k, v, parts)
        out, start = [], 0
        for part in parts:
            rows = slice(start, start + part.n)
            start += part.n
            kp, vp = k[rows], v[rows]
            layer_cache = part.cache.layers[index]
            layer_cache.append(kp, vp)
            out.append(self._attend(index, q[rows], kp, vp, layer_cache, part.paths))
        return torch.cat(out)

    def _attend_bf16(self, index: int, q, k, v, parts: list[Part]) -> torch.Tensor | None:
        """A stored-block model's layer on its bfloat16 cache, in two native calls per part:
        the part's float32 keys and values rounded into its buffers (`append_bf16`, what
        `append` writes after a cast), then the tree kernel, whose float32 output is the
        layer's (not rounded to bfloat16 and back). A step spent as long in the casts and
        copies around these calls as in the attention itself. None for a layer where it does
        not apply (a window, a soft cap, no native writer): those take the general way in
        every pass, so a row is computed one way whatever the pass holds."""
        if self.append_bf16 is None or self.windows[index] is not None:
            return None
        if self.softcap is not None or not self.pair_keys:
            return None
        out, start = [], 0
        qb = q.to(torch.bfloat16)
        for part in parts:
            rows = slice(start, start + part.n)
            start += part.n
            layer = part.cache.layers[index]
            if not layer.room_for(part.n):
                layer.make_room(k[rows].transpose(0, 1)[None], v[rows].transpose(0, 1)[None])
            keys, values, tiles = layer.buffers()
            self.append_bf16(keys, values, tiles, layer.length, k[rows], v[rows])
            layer.length += part.n
            table = part.paths("tiles")
            got = self.tree_attention(
                qb[rows], layer.tiles(True), values, table.prefix, table.paths, table.lengths,
                self.scaling,
            )  # fmt: skip
            out.append(got.reshape(part.n, -1))
        return out[0] if len(out) == 1 else torch.cat(out)

    def _forest(self, index: int, parts: list[Part]) -> bool:
        """Whether this layer's parts attend in one forest call: a shared prompt, the native
        kernel on float32 keys, no window and no soft-capping."""
        return (
            parts[0].shared > 0
            and self.forest_attention is not None
            and not self.pair_keys
            and self.softcap is None
            and self.windows[index] is None
        )

    def _attend_forest(self, index: int, q, k, v, parts: list[Part]) -> torch.Tensor:
        """All parts' rows in one kernel call, the shared prompt's keys read once for all."""
        layers = [part.cache.layers[index] for part in parts]
        plan = self._forest_plan(parts)
        if plan.one_row_each and all(layer.room_for_one() for layer in layers):
            for layer in layers:
                layer.tiles()  # the tiles exist before the write, so it keeps them in step
            buffers = [layer.buffers() for layer in layers]
            slots = [layer.length for layer in layers]
            self.append_rows(*map(list, zip(*buffers, strict=True)), slots, k, v)
            for layer in layers:
                layer.length += 1
        else:
            for layer, rows in zip(layers, plan.rows, strict=True):
                layer.append(k[rows], v[rows])
        out = self.forest_attention(
            q, layers[0].tiles(), layers[0].value_buffer(), parts[0].shared,
            [layer.tiles() for layer in layers], [layer.value_buffer() for layer in layers],
            plan.prefixes, plan.counts, plan.paths, plan.lengths, self.scaling,
        )  # fmt: skip
        return out.reshape(q.shape[0], -1)

    def _forest_plan(self, parts: list[Part]) -> ForestPlan:
        """The pass's forest arguments, built at its first layer (the same for every layer)."""
        if self._plan is None or self._plan.parts is not parts:
            self._plan = ForestPlan(parts)
        return self._plan

    def forward_invariant(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        allowed: torch.Tensor | None,
        cache,
        last: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """As `forward`, with every row computed as the one-token pass computes it: the pass
        padded to (or split into) one kernel's row counts, each row's attention the one-token
        call over its own path (invariant.py)."""
        n = ids.shape[0]
        part = Part(n, cache, path_tables(allowed, n, cache.get_seq_length()))
        return self.forward_parts(ids, positions, [part], last)

    def forward_parts(
        self, ids: torch.Tensor, positions: torch.Tensor, parts: list[Part], last: int | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The invariant forward over one or more parts (`Part`: a generation's trie rows and
        its cache), their rows side by side in `ids` and `positions`: every weight is read
        once for all of them, each row computed as its own one-token pass computes it."""
        n = ids.shape[0]
        if self.fused is not None:
            return self.fused.forward(self, ids, positions, parts, last)
        d, hk, hq = self.head_dim, self.kv_heads, self.heads
        fam = self.family
        m = self.classes.padded(n)
        if m > n:  # dummy rows: a copy of the first token, never cached, never attended to
            ids = torch.cat([ids, ids[:1].expand(m - n)])
            positions = torch.cat([positions, positions[:1].expand(m - n)])
        tables = {id(r): r.tables(positions, last) for r in self.rotaries}
        run = self.classes.apply
        norm = lambda x, module: _norm(fam.norm, x, module)  # noqa: E731
        h = self.decoder.embed_tokens(ids)
        if self.embedding_multiplier is not None:
            h = h * self.embedding_multiplier
        scale = self.residual_multiplier
        out = h.new_zeros(m, hq * d) if m > n else None
        for index, layer in enumerate(self.layers):
            proj, attn = self.projections[index], layer.self_attn
            rotary = self.layer_rotary[index]
            cos, sin = tables[id(rotary)]
            qkv = run(proj.qkv, h if fam.blocks == "post" else norm(h, layer.input_layernorm))
            if fam.qk_norm is None:
                qk = qkv[:, : (hq + hk) * d].view(m, hq + hk, d)
                qk = rotary.apply(qk, cos, sin)
                q, k = qk[:n, :hq], qk[:n, hq:]
            else:
                q, k = qkv[:, : hq * d], qkv[:, hq * d : (hq + hk) * d]
                if fam.qk_norm == "whole":
                    q, k = norm(q, attn.q_norm), norm(k, attn.k_norm)
                q, k = q.reshape(m, hq, d), k.reshape(m, hk, d)
                if fam.qk_norm == "head":
                    q, k = norm(q, attn.q_norm), norm(k, attn.k_norm)
                q, k = rotary.apply(q, cos, sin)[:n], rotary.apply(k, cos, sin)[:n]
            v = qkv[:n, (hq + hk) * d :].view(n, hk, d)
            o = self._attend_parts(index, q, k, v, parts)
            if out is not None:
                out[:n] = o
                o = out
            a = run(proj.o, o)
            if fam.blocks != "pre":
                a = norm(a, layer.post_attention_layernorm)
            h = h + a if scale is None else h + a * scale
            if fam.blocks == "pre":
                x = norm(h, layer.post_attention_layernorm)
            elif fam.blocks == "sandwich":
                x = norm(h, layer.pre_feedforward_layernorm)
            else:
                x = h
            x = run(proj.gate_up, x)
            half = x.shape[-1] // 2
            x = run(proj.down, self.acts[index](x[:, :half]) * x[:, half:])
            if fam.blocks != "pre":
                x = norm(x, layer.post_feedforward_layernorm)
            h = h + x if scale is None else h + x * scale
        return norm(h, self.decoder.norm)[:n], h[:n]

    def forward(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        allowed: torch.Tensor | None,
        cache,
        last: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """ids, positions: [n]; allowed: bool [n, n] (which pass tokens each may see; None
        for one token); cache: the run's DynamicCache, extended by n; last: the largest
        position, when known on the host. Returns the final-norm hidden states [n, D] and the
        last layer's output before that norm."""
        if self.invariant:
            return self.forward_invariant(ids, positions, allowed, cache, last)
        n = ids.shape[0]
        d, g, hk, hq = self.head_dim, self.groups, self.kv_heads, self.heads
        h = self.decoder.embed_tokens(ids)
        cos, sin = self.decoder.rotary_emb(h[None], positions[None])
        cos, sin = cos[0, :, None, :], sin[0, :, None, :]  # [n, 1, d]
        mask = None
        if n > 1:
            past = cache.get_seq_length()
            mask = torch.zeros(n, past + n, dtype=h.dtype, device=h.device)
            mask[:, past:].masked_fill_(~allowed.to(h.device), torch.finfo(h.dtype).min)
            mask = mask.repeat(g, 1)[None, None]  # rows follow the folded query layout
        for index, layer in enumerate(self.layers):
            attn, mlp = layer.self_attn, layer.mlp
            x = _rms(h, layer.input_layernorm)
            qkv = getattr(attn, "sw_qkv", None)
            if qkv is not None:
                qkv = qkv(x)
                qk = qkv[:, : (hq + hk) * d].view(n, hq + hk, d)
                qk = qk * cos + _rotate_half(qk) * sin
                q, k = qk[:, :hq], qk[:, hq:]
                v = qkv[:, (hq + hk) * d :].view(n, hk, d)
            else:
                q = _linear(attn.q_proj, x).view(n, hq, d)
                k = _linear(attn.k_proj, x).view(n, hk, d)
                v = _linear(attn.v_proj, x).view(n, hk, d)
                q = q * cos + _rotate_half(q) * sin
                k = k * cos + _rotate_half(k) * sin
            keys, values = cache.layers[index].update(
                k.transpose(0, 1)[None], v.transpose(0, 1)[None]
            )
            if n == 1:  # transformers' own one-token path (SDPA's native GQA): same values
                o = F.scaled_dot_product_attention(
                    q.transpose(0, 1)[None], keys, values, scale=self.scaling, enable_gqa=True
                ).reshape(1, hq * d)
            else:  # a group's query heads become rows of their K/V head: no K/V copy
                q = q.reshape(n, hk, g, d).permute(1, 2, 0, 3).reshape(1, hk, g * n, d)
                o = F.scaled_dot_product_attention(
                    q, keys, values, attn_mask=mask, scale=self.scaling
                )
                o = o.view(hk, g, n, d).permute(2, 0, 1, 3).reshape(n, hq * d)
            h = h + _linear(attn.o_proj, o)
            x = _rms(h, layer.post_attention_layernorm)
            gate_up = getattr(mlp, "sw_gate_up", None)
            if gate_up is not None:
                x = gate_up(x)
                half = x.shape[-1] // 2
                x = F.silu(x[:, :half]) * x[:, half:]
            else:
                x = F.silu(_linear(mlp.gate_proj, x)) * _linear(mlp.up_proj, x)
            h = h + _linear(mlp.down_proj, x)
        return _rms(h, self.decoder.norm), h


class FusedLayers:
    """A model on stored blocks (quant.py) whose layers are Llama's (pre-norm, SiLU, no window,
    float32 activations) runs each layer's work around its attention in two native calls
    (quant_linear.cpp `attn_in`, `attn_out`) instead of about 25 PyTorch ops: at the default
    model's size those ops cost as long as the products. Where its attention is the tree
    kernel's over the whole cache, a one-part pass runs all layers in one call (`stack`: the
    same functions, so the same bits; the default model's one-row pass 6.98 -> 6.24 ms).
    Each row is still computed from its own values alone, so a tree row is the one-token
    pass's row."""

    def __init__(self, layers: list[dict], stack=None):
        self.layers = layers
        self.stack = stack  # all layers in one native call (`_stacked`), where it applies

    @classmethod
    def of(cls, lean: LeanDecoder, model) -> FusedLayers | None:
        if not lean.family.plain or any(lean.windows) or compute_dtype(model) != torch.float32:
            return None
        if not quant.available() or lean.classes.low != 1:
            return None
        if any(type(act.__self__).__name__ not in ("SiLUActivation", "SiLU") for act in lean.acts):
            return None
        if any(r.table.cos.shape[-1] != lean.head_dim for r in lean.rotaries):
            return None
        layers = [_fused_layer(layer) for layer in lean.layers]
        return None if any(x is None for x in layers) else cls(layers, _stack(lean, layers))

    def forward(self, lean: LeanDecoder, ids, positions, parts: list[Part], last):
        kernel = quant.kernel()
        n, d, hk, hq = ids.shape[0], lean.head_dim, lean.kv_heads, lean.heads
        tables = {id(r): r.tables(positions, last) for r in lean.rotaries}
        h = lean.decoder.embed_tokens(ids).float().contiguous()
        if self.stack is not None and len(parts) == 1:
            h = self._stacked(lean, h, tables, parts[0])
            return _norm(lean.family.norm, h, lean.decoder.norm), h
        for index, f in enumerate(self.layers):
            cos, sin = tables[id(lean.layer_rotary[index])]
            qkv = kernel.attn_in(
                h, f["norm1"], f["eps1"], *f["qkv"], cos.reshape(n, d), sin.reshape(n, d),
                hq + hk, d, 0,
            )  # fmt: skip
            q = qkv[:, : hq * d].view(n, hq, d)
            k = qkv[:, hq * d : (hq + hk) * d].view(n, hk, d)
            v = qkv[:, (hq + hk) * d :].view(n, hk, d)
            o = lean._attend_parts(index, q, k, v, parts)
            h = kernel.attn_out(
                h,
                o.float().contiguous(),
                *f["o"],
                f["norm2"],
                f["eps2"],
                *f["gate_up"],
                *f["down"],
                0,
            )
        return _norm(lean.family.norm, h, lean.decoder.norm), h

    def _stacked(self, lean: LeanDecoder, h, tables, part: Part) -> torch.Tensor:
        """One part's pass through every layer in one native call: each layer's cache made
        room in and given its key tiles first (as `_attend_bf16` and `_attend` would), its
        rows counted after; the same native functions in the same order, so the same bits."""
        n, d, hk = h.shape[0], lean.head_dim, lean.kv_heads
        caches = part.cache.layers
        like = h.new_empty(1, hk, n, d)  # what make_room sizes the buffers by
        pairs = lean.pair_keys
        for layer in caches:
            if not layer.room_for(n):
                layer.make_room(like, like)
            layer.tiles(pairs)
        buffers = [layer.buffers() for layer in caches]
        rotary = {key: (cos.reshape(n, d), sin.reshape(n, d)) for key, (cos, sin) in tables.items()}
        by_layer = [rotary[id(r)] for r in lean.layer_rotary]
        table = part.paths("tiles")
        h = self.stack.run(
            h, [c for c, _ in by_layer], [s for _, s in by_layer],
            [b[0] for b in buffers], [b[1] for b in buffers], [b[2] for b in buffers],
            [layer.length for layer in caches], table.prefix, table.paths, table.lengths,
        )  # fmt: skip
        for layer in caches:
            layer.length += n
        return h


def _stack(lean: LeanDecoder, layers: list[dict]):
    """The native layer stack for a model whose every layer's attention is the tree kernel's
    over its whole cache (no window, no soft cap): a bfloat16 cache read as key pairs
    (`_attend_bf16`) or a float32 one read as float tiles (`_attend`); else None."""
    kernel = quant.kernel()
    bf16 = lean.attention_dtype == torch.bfloat16 and lean.pair_keys
    f32 = lean.attention_dtype == torch.float32 and not lean.pair_keys
    if not (bf16 or f32) or lean.softcap is not None or lean.tree_attention is None:
        return None
    entry = native.attend_entry()
    if entry is None or not hasattr(kernel, "Stack"):
        return None
    stack = kernel.Stack(entry, lean.heads, lean.kv_heads, lean.head_dim, float(lean.scaling))
    for f in layers:
        stack.add(
            f["norm1"], f["eps1"], *f["qkv"], *f["o"], f["norm2"], f["eps2"], *f["gate_up"],
            *f["down"],
        )  # fmt: skip
    return stack


def _parts(modules) -> tuple | None:
    """(packed, types, rows, biases) of projections reading one input, as `attn_in` takes
    them: their joined weight where they were merged, else each apart."""
    if isinstance(modules, QuantMerged):
        w = modules.weight
        return [w.packed], [w.qtype], [w.n], [modules.bias]
    if not isinstance(modules, list) or not all(isinstance(m, QuantLinear) for m in modules):
        return None  # float projections (merged or not): the lean pass's own way
    return ([m.qweight.packed for m in modules], [m.qweight.qtype for m in modules],
            [m.out_features for m in modules], [m.bias for m in modules])  # fmt: skip


def _fused_layer(layer) -> dict | None:
    attn, mlp = layer.self_attn, layer.mlp
    qkv = _parts(getattr(attn, "sw_qkv", None) or [attn.q_proj, attn.k_proj, attn.v_proj])
    gate_up = _parts(getattr(mlp, "sw_gate_up", None) or [mlp.gate_proj, mlp.up_proj])
    o, down = attn.o_proj, mlp.down_proj
    if qkv is None or gate_up is None or not isinstance(o, QuantLinear):
        return None
    if not isinstance(down, QuantLinear) or o.bias is not None or down.bias is not None:
        return None
    if any(b is not None for b in gate_up[3]):
        return None
    norms = (layer.input_layernorm, layer.post_attention_layernorm)
    if any(n.weight.dtype != torch.float32 for n in norms):
        return None
    return {
        "norm1": norms[0].weight.detach(), "eps1": float(norms[0].variance_epsilon),
        "qkv": qkv, "o": (o.qweight.packed, o.qweight.qtype),
        "norm2": norms[1].weight.detach(), "eps2": float(norms[1].variance_epsilon),
        "gate_up": gate_up[:3], "down": (down.qweight.packed, down.qweight.qtype),
    }  # fmt: skip

"""The two ways a verification pass runs the model, chosen per run (`backend_for`) and used
through one interface: `pass_over(runner, trie, ids, positions)` returns the pass's
final-norm hidden states (the lm_head then runs lazily on the nodes the walk visits) or, for
models that post-process their logits, the logits themselves.

- LeanBackend: our decoder forward on the decoder families leanpass.py describes (Llama,
  Mistral, Qwen2/3, Gemma 2/3, Phi-3, OLMo 2, Granite), batch-invariant by default: every trie row equals what plain decoding computes for it, bit for bit, in every
  dtype (invariant.py).
- StockBackend: transformers' forward with a 4-D float additive mask (0 where a token may look,
  the dtype's minimum elsewhere) and the model's own cache; a row matches plain decoding only up
  to rounding. Grouped query heads are folded in its passes (attention.py)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from swiftwriter.engine.passes.attention import folding, install
from swiftwriter.engine.passes.kvcache import BufferLayer, GrowingLayer, growing_cache
from swiftwriter.engine.passes.leanpass import (
    LeanDecoder,
    Part,
    compute_dtype,
    describe,
    fixed_rotary,
    path_tables,
    supports,
    windows,
)
from swiftwriter.engine.passes.modelstate import settings_for
from swiftwriter.engine.passes.tree import Trie


@dataclass
class PassOutput:
    hidden: torch.Tensor | None  # [n, D] after the final norm (lm_head not applied)
    logits: torch.Tensor | None  # [n, V] when the model's own head had to run
    prenorm: torch.Tensor | None  # [n, D] the last layer's output, when the backend has it


def lazy_head_ok(model) -> bool:
    """True when the lm_head may run apart from the decoder: no logit post-processing, or
    only one `head_finish` redoes on the rows the walk visits."""
    return (
        model.get_decoder() is not None
        and model.get_output_embeddings() is not None
        and getattr(model.config, "logit_scale", None) is None
    )


def head_finish(model):
    """What the model's own forward does to the lm_head's output, elementwise and in the
    model's dtype (Granite divides by `logits_scaling`, Gemma 2 soft-caps), as a function of
    logits [rows, V]; None when nothing. Row by row when the vocabulary is not a multiple of
    64, so a row never falls on the vectorised loop's scalar tail in one call and not in
    another (tanh rounds differently there)."""
    config = model.config
    divide = getattr(config, "logits_scaling", None)
    divide = None if divide in (None, 1, 1.0) else divide
    cap = getattr(config, "final_logit_softcapping", None) or None
    if divide is None and cap is None:
        return None

    def finish(logits: torch.Tensor) -> torch.Tensor:
        if cap is not None and logits.shape[-1] % 64 and logits.shape[0] > 1:
            return torch.stack([finish(row[None])[0] for row in logits])
        if divide is not None:
            logits = logits / divide
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return logits

    return finish


class StockBackend:
    name = "stock"
    invariant = False
    together = False  # several runs' tries in one pass (`pass_together`)
    classes = None
    product = None  # the invariant pass's product kernel, for the lm_head too
    cache_dtype = None  # the KV cache's dtype where it is not the activations'

    def __init__(self, model):
        self.model = model
        self.decoder = model.get_decoder()
        self.lazy_head = lazy_head_ok(model)
        self.finish = head_finish(model)  # applied to the lazy head's logits (verify.py)
        self.fold = install(model)  # grouped query heads folded, K/V never copied
        self.windows = windows(model)

    def _masks(self, trie: Trie, prefix: int, dtype, device):
        """The pass's tree mask; with sliding-window layers a windowed one for them too (the
        cache keeps every key: kvcache.growing_cache), by layer type where the config has them."""
        full = tree_mask(trie, prefix, dtype).to(device)
        window = next((w for w in self.windows if w is not None), None)
        if window is None:
            return full
        cut = tree_mask(trie, prefix, dtype, window).to(device)
        if getattr(self.decoder.config, "layer_types", None):
            return {"full_attention": full, "sliding_attention": cut}
        return cut

    def pass_over(self, runner, trie: Trie, ids: torch.Tensor, pos: torch.Tensor) -> PassOutput:
        n = len(trie)
        # where the ids are: the embedding's own weight is on the meta device when offloaded
        mask = (
            None if trie.is_chain() else self._masks(trie, runner.length, runner.dtype, ids.device)
        )
        with folding(self.fold and n > 1):
            if self.lazy_head:
                out = self.decoder(
                    input_ids=ids, attention_mask=mask, position_ids=pos, cache=runner.cache,
                    use_cache=True,
                )  # fmt: skip
                return PassOutput(out.last_hidden_state[0], None, None)
            out = self.model(
                input_ids=ids, attention_mask=mask, position_ids=pos, cache=runner.cache,
                use_cache=True,
            )  # fmt: skip
            return PassOutput(None, out.logits[0], None)


class LeanBackend(StockBackend):
    name = "lean"

    def __init__(self, model, invariant: bool):
        super().__init__(model)
        self.lean = LeanDecoder(model, invariant=invariant)
        dtype = self.lean.attention_dtype
        self.cache_dtype = dtype if dtype != compute_dtype(model) else None
        self.invariant = self.lean.invariant
        self.together = self.invariant
        self.classes = self.lean.classes if self.invariant else None
        self.product = self.lean.product if self.invariant else None

    def pass_over(self, runner, trie: Trie, ids: torch.Tensor, pos: torch.Tensor) -> PassOutput:
        allowed = trie.ancestor_mask() if len(trie) > 1 else None
        last = runner.length + max(trie.depths)  # known here: no read from the device
        hidden, prenorm = self.lean.forward(ids[0], pos[0], allowed, runner.cache, last)
        return PassOutput(hidden, None, prenorm)

    def pass_together(self, runners, tries: list[Trie], ids, pos) -> list[PassOutput]:
        """Several runs' tries in one invariant pass (ids, pos: their rows side by side), each
        run's rows attending to its own cache: one PassOutput per run."""
        shared = shared_prompt(runners)
        parts = [
            Part(len(t), r.cache, path_tables(t.ancestor_mask() if len(t) > 1 else None,
                                              len(t), r.length), shared)
            for r, t in zip(runners, tries, strict=True)
        ]  # fmt: skip
        last = max(r.length + max(t.depths) for r, t in zip(runners, tries, strict=True))
        hidden, prenorm = self.lean.forward_parts(ids, pos, parts, last)
        outs, start = [], 0
        for t in tries:
            rows = slice(start, start + len(t))
            outs.append(PassOutput(hidden[rows], None, prenorm[rows]))
            start += len(t)
        return outs


def shared_prompt(runners) -> int:
    """The cache slots every runner holds alike (a prompt prefilled once and copied, never
    slid since), in whole tiles of the tree kernel's key layout: 0 when there are none."""
    keys = {r.prompt_key for r in runners}
    if len(keys) != 1 or None in keys:
        return 0
    tile = BufferLayer.TILE
    return min(r.prompt_slots for r in runners) // tile * tile


def tree_mask(trie: Trie, prefix: int, dtype, window: int | None = None) -> torch.Tensor:
    """The stock forward's additive mask [1, 1, n, prefix + n]: every node sees the prefix,
    itself and its ancestors; with a `window`, only those less than `window` positions back."""
    n = len(trie)
    allowed = torch.ones(n, prefix + n, dtype=torch.bool)
    allowed[:, prefix:] = trie.ancestor_mask()
    if window is not None:
        depths = torch.tensor(trie.depths)
        where = torch.cat([torch.arange(prefix), prefix + depths])  # each key's position
        allowed &= (prefix + depths)[:, None] - where[None, :] < window
    mask = torch.zeros(n, prefix + n, dtype=dtype)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


def set_exact(model, exact: bool) -> None:
    """Whether generations on this model run batch-invariant passes unless told otherwise
    (the loader turns them off where they cost too much: modelstore.loader.exact_by_default)."""
    settings_for(model).exact = exact


def exact_by_default(model) -> bool:
    return settings_for(model).exact


def backend_for(model, lean: bool = True, invariant: bool = True) -> StockBackend:
    """The model's verification backend for one run: the lean forward where it computes
    exactly what the model computes (checked per run: a hook added since would stop firing in
    it, and a weight re-laid since changes the kernels) and the cache grows in place, else the
    stock forward. Built per run: nothing of it outlives the run."""
    use_lean = lean and lazy_head_ok(model) and supports(model) and _grows_in_place(model)
    if use_lean and invariant and fixed_rotary(model):
        return LeanBackend(model, invariant)
    if use_lean and describe(model).plain and not any(windows(model)):
        return LeanBackend(model, invariant)  # the earlier passes: Llama's layer, no window
    return StockBackend(model)


def exactness(model, invariant: bool | None = None) -> str:
    """'' when a run on this model computes every row as plain decoding does, so speculation
    writes plain decoding's text; else why not, in a few words. `invariant`: what the run asks
    for (None: the model's default, `exact_by_default`)."""
    if invariant is None and not exact_by_default(model):
        # not the dtype: the loader's `auto` found exact passes dear on this CPU's kernels
        dtype = str(getattr(model, "dtype", "this precision")).removeprefix("torch.")
        return (
            f"auto chose this CPU's fastest {dtype} kernels over exact passes; --dtype {dtype} "
            "keeps every pass exact"
        )
    if invariant is False:
        return "passes take the fastest kernels for this precision"
    lean = lazy_head_ok(model) and supports(model) and _grows_in_place(model)
    if lean and fixed_rotary(model):
        return ""
    layers = getattr(model.get_decoder(), "layers", None) if hasattr(model, "get_decoder") else None
    kind = type(layers[0]).__name__ if layers else type(model).__name__
    if supports(model) and not fixed_rotary(model):
        return f"{kind}: its rotary frequencies change with the length"
    if any(getattr(m, "_hf_hook", None) is not None for m in model.modules()):
        return "spread by accelerate: its offloaded layers run transformers' own forward"
    return f"{kind} runs transformers' own forward"


NOT_EXACT = "may differ from plain decoding"  # the Speed dock's words (ui/stats_dock.py)


def precision_line(precision: str, model, invariant: bool | None = None) -> str:
    """'precision: bfloat16', and where speculation on this model may not write plain
    decoding's text, the Speed dock's words for it and why: what `generate` and `bench` print
    (`invariant` as for `exactness`: bench's methods ask for invariant passes)."""
    why = exactness(model, invariant) if hasattr(model, "get_decoder") else ""
    return f"precision: {precision}" + (f" · {NOT_EXACT} ({why})" if why else "")


def _grows_in_place(model) -> bool:
    return all(isinstance(layer, GrowingLayer) for layer in growing_cache(model.config).layers)

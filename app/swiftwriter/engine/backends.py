"""The two ways a verification pass runs the model, chosen per run (`backend_for`) and used
through one interface: `pass_over(runner, trie, ids, positions)` returns the pass's
final-norm hidden states (the lm_head then runs lazily on the nodes the walk visits) or, for
models that post-process their logits, the logits themselves.

- LeanBackend: our decoder forward on Llama-family models (leanpass.py), batch-invariant by
  default: every trie row equals what plain decoding computes for it, bit for bit, in every
  dtype (invariant.py).
- StockBackend: transformers' forward with a 4-D float additive mask (0 where a token may look,
  the dtype's minimum elsewhere) and the model's own cache; a row matches plain decoding only up
  to rounding. Grouped query heads are folded in its passes (attention.py)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from swiftwriter.engine.attention import folding, install
from swiftwriter.engine.kvcache import GrowingLayer, growing_cache
from swiftwriter.engine.leanpass import LeanDecoder, supports
from swiftwriter.engine.trie import Trie


@dataclass
class PassOutput:
    hidden: torch.Tensor | None  # [n, D] after the final norm (lm_head not applied)
    logits: torch.Tensor | None  # [n, V] when the model's own head had to run
    prenorm: torch.Tensor | None  # [n, D] the last layer's output, when the backend has it


def lazy_head_ok(model) -> bool:
    """True when the lm_head may run apart from the decoder (no logit post-processing)."""
    config = model.config
    return (
        model.get_decoder() is not None
        and model.get_output_embeddings() is not None
        and not getattr(config, "final_logit_softcapping", None)
        and getattr(config, "logit_scale", None) is None
    )


class StockBackend:
    name = "stock"
    invariant = False
    classes = None
    product = None  # the invariant pass's product kernel, for the lm_head too

    def __init__(self, model):
        self.model = model
        self.decoder = model.get_decoder()
        self.lazy_head = lazy_head_ok(model)
        self.fold = install(model)  # grouped query heads folded, K/V never copied

    def pass_over(self, runner, trie: Trie, ids: torch.Tensor, pos: torch.Tensor) -> PassOutput:
        n = len(trie)
        mask = None if trie.is_chain() else tree_mask(trie, runner.length, runner.dtype)
        mask = mask if mask is None else mask.to(ids.device)
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
        self.invariant = self.lean.invariant
        self.classes = self.lean.classes if self.invariant else None
        self.product = self.lean.product if self.invariant else None

    def pass_over(self, runner, trie: Trie, ids: torch.Tensor, pos: torch.Tensor) -> PassOutput:
        allowed = trie.ancestor_mask() if len(trie) > 1 else None
        last = runner.length + max(trie.depths)  # known here: no read from the device
        hidden, prenorm = self.lean.forward(ids[0], pos[0], allowed, runner.cache, last)
        return PassOutput(hidden, None, prenorm)


def tree_mask(trie: Trie, prefix: int, dtype) -> torch.Tensor:
    """The stock forward's additive mask [1, 1, n, prefix + n]: every node sees the prefix,
    itself and its ancestors."""
    n = len(trie)
    allowed = torch.ones(n, prefix + n, dtype=torch.bool)
    allowed[:, prefix:] = trie.ancestor_mask()
    mask = torch.zeros(n, prefix + n, dtype=dtype)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


def set_exact(model, exact: bool) -> None:
    """Whether generations on this model run batch-invariant passes unless told otherwise
    (the loader turns them off where they cost too much: modelstore.loader.exact_by_default)."""
    model.__dict__["_swiftwriter_exact"] = exact


def exact_by_default(model) -> bool:
    return model.__dict__.get("_swiftwriter_exact", True)


def backend_for(model, lean: bool = True, invariant: bool = True) -> StockBackend:
    """The model's verification backend for one run: the lean forward where it computes
    exactly what the model computes (checked per run: a hook added since would stop firing in
    it, and a weight re-laid since changes the kernels) and the cache grows in place, else the
    stock forward. Built per run: nothing of it outlives the run."""
    use_lean = lean and lazy_head_ok(model) and supports(model) and _grows_in_place(model)
    return LeanBackend(model, invariant) if use_lean else StockBackend(model)


def _grows_in_place(model) -> bool:
    return all(isinstance(layer, GrowingLayer) for layer in growing_cache(model.config).layers)

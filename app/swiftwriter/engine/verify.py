"""The model side of the engine: prefill, one forward pass over a flattened trie, logits on
demand, and compaction of the KV cache to the accepted path.

On Llama-family models the passes run our lean decoder (leanpass.py), batch-invariant by
default: every trie row equals what plain decoding computes for it, bit for bit, in every dtype
(invariant.py). Other models take the stock forward: a 4-D float additive mask (0 where a token
may look, the dtype's minimum elsewhere), position ids = prefix length + depth, the model's own
cache; there a row matches plain decoding only up to rounding. The lm_head runs only on the
nodes the acceptance walk visits."""

from __future__ import annotations

import contextlib
import os

import torch

from swiftwriter.engine.attention import folding, install
from swiftwriter.engine.kvcache import GrowingLayer, growing_cache
from swiftwriter.engine.leanpass import LeanDecoder, supports
from swiftwriter.engine.trie import Trie


@contextlib.contextmanager
def _native_gqa(enabled: bool):
    """With any mask, SDPA expands grouped K/V heads; on CPU the native GQA path gives the same
    result without the copies. Only switched on around our own passes."""
    if not enabled:
        yield
        return
    old = os.environ.get("TRANSFORMERS_SDPA_FORCE_GQA")
    os.environ["TRANSFORMERS_SDPA_FORCE_GQA"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TRANSFORMERS_SDPA_FORCE_GQA", None)
        else:
            os.environ["TRANSFORMERS_SDPA_FORCE_GQA"] = old


def execution_device(module) -> torch.device:
    """Where a module computes: accelerate's hook says so for offloaded (meta) weights."""
    hook = getattr(module, "_hf_hook", None)
    device = getattr(hook, "execution_device", None) if hook is not None else None
    if device is not None:
        return torch.device(device) if not isinstance(device, torch.device) else device
    param = next(module.parameters(), None)
    return param.device if param is not None else torch.device("cpu")


class ModelRunner:
    """Owns the KV cache of one generation and runs the target model over tries."""

    def __init__(self, model, prefill_chunk: int = 2048, lean: bool = True, invariant: bool = True):
        self.model = model
        self.config = model.config
        self.decoder = model.get_decoder()
        self.lm_head = model.get_output_embeddings()
        # Models that post-process their logits take the plain forward path.
        self.lazy_head = (
            self.decoder is not None
            and self.lm_head is not None
            and not getattr(self.config, "final_logit_softcapping", None)
            and getattr(self.config, "logit_scale", None) is None
        )
        self.device = execution_device(self.lm_head if self.lm_head is not None else model)
        self.input_device = execution_device(model.get_input_embeddings())
        self.dtype = next(model.parameters()).dtype
        self.prefill_chunk = prefill_chunk
        self.gqa = self.input_device.type == "cpu"
        self.fold = install(model)  # grouped query heads folded, K/V never copied (attention.py)
        # Our passes skip transformers' per-layer machinery where the arithmetic is Llama's
        # (leanpass.py); prefill and every other model keep the stock forward.
        self.cache = growing_cache(self.config)
        self.lean = (
            LeanDecoder(model, invariant=invariant)
            if self.lazy_head and lean and supports(model) and self._growing()
            else None
        )
        # True when every row of a pass equals the one-token pass bit for bit (invariant.py);
        # otherwise greedy output matches plain decoding only up to rounding.
        self.invariant = self.lean is not None and self.lean.invariant
        self.classes = self.lean.classes if self.invariant else None
        self.length = 0  # tokens in the cache
        self._hidden: torch.Tensor | None = None
        self._logits: torch.Tensor | None = None
        self._row_logits: dict[int, torch.Tensor] = {}
        self._capture = None  # pre-norm hook, only when a drafter reads that state
        self._prenorm: torch.Tensor | None = None
        self.prefill_features: dict[str, torch.Tensor] = {}

    def enable_prenorm(self) -> None:
        """Keep the last decoder layer's output (before the final norm) of every pass."""
        if self._capture is None:
            from swiftwriter.engine.heads.drafters import PrenormCapture

            self._capture = PrenormCapture(self.model)

    def close(self) -> None:
        if self._capture is not None:
            self._capture.close()
            self._capture = None

    def feature_at(self, node: int, kind: str) -> torch.Tensor | None:
        """The hidden state a drafter reads at trie node `node` of the last pass ("final":
        after the final norm; "prenorm": before it). None when this model path has none."""
        if kind == "final":
            return None if self._hidden is None else self._hidden[node]
        return None if self._prenorm is None else self._prenorm[node]

    def _growing(self) -> bool:
        return all(isinstance(layer, GrowingLayer) for layer in self.cache.layers)

    def reset(self) -> None:
        self.cache = growing_cache(self.config)
        self.length = 0

    @torch.inference_mode()
    def prefill(self, tokens: list[int]) -> None:
        for start in range(0, len(tokens), self.prefill_chunk):
            chunk = tokens[start : start + self.prefill_chunk]
            ids = torch.tensor([chunk], device=self.input_device)
            pos = torch.arange(self.length, self.length + len(chunk), device=self.input_device)[
                None
            ]
            if self.lazy_head:
                with _native_gqa(self.gqa), folding(self.fold):
                    out = self.decoder(
                        input_ids=ids, position_ids=pos, cache=self.cache, use_cache=True
                    )
                self.prefill_features = {"final": out.last_hidden_state[0, -1]}
                if self._capture is not None:
                    self.prefill_features["prenorm"] = self._capture.value[0, -1]
            else:
                self.model(
                    input_ids=ids,
                    position_ids=pos,
                    cache=self.cache,
                    use_cache=True,
                    logits_to_keep=1,
                )
            self.length += len(chunk)

    def tree_mask(self, trie: Trie) -> torch.Tensor:
        n, p = len(trie), self.length
        allowed = torch.ones(n, p + n, dtype=torch.bool)
        allowed[:, p:] = trie.ancestor_mask()
        mask = torch.zeros(n, p + n, dtype=self.dtype)
        mask.masked_fill_(~allowed, torch.finfo(self.dtype).min)
        return mask[None, None].to(self.input_device)

    @torch.inference_mode()
    def forward_trie(self, trie: Trie) -> None:
        """Run the model over all trie tokens; the cache grows by len(trie) until `compact`."""
        n = len(trie)
        ids = torch.tensor([trie.tokens], device=self.input_device)
        pos = (torch.tensor(trie.depths) + self.length)[None].to(self.input_device)
        if self.lean is not None:
            allowed = trie.ancestor_mask() if n > 1 else None
            self._hidden, prenorm = self.lean.forward(ids[0], pos[0], allowed, self.cache)
            self._prenorm = prenorm if self._capture is not None else None
            self._logits = None
            self._row_logits = {}
            self._pending = n
            return
        mask = None if trie.is_chain() else self.tree_mask(trie)
        with _native_gqa(self.gqa and n > 1), folding(self.fold and n > 1):
            if self.lazy_head:
                out = self.decoder(
                    input_ids=ids,
                    attention_mask=mask,
                    position_ids=pos,
                    cache=self.cache,
                    use_cache=True,
                )
                self._hidden = out.last_hidden_state[0]
                if self._capture is not None:
                    self._prenorm = self._capture.value[0]
                self._logits = None
                self._row_logits = {}
            else:
                out = self.model(
                    input_ids=ids,
                    attention_mask=mask,
                    position_ids=pos,
                    cache=self.cache,
                    use_cache=True,
                )
                self._logits = out.logits[0]
                self._hidden = None
        self._pending = n

    @torch.inference_mode()
    def logits_at(self, node: int, trie: Trie | None = None) -> torch.Tensor:
        """float32 [V] logits after trie node `node`, computed on demand: the root alone, then
        on a miss the node with its whole subtree in one batched lm_head call (the lm_head reads
        its full weight per call, so a few rows cost little more than one)."""
        if self._logits is not None:
            return self._logits[node].float()
        cached = self._row_logits.get(node)
        if cached is not None:
            return cached
        rows = [node] if node == 0 or trie is None else trie.subtree(node, limit=32)
        index = torch.tensor(rows, device=self._hidden.device)
        h = self._hidden.index_select(0, index).to(self.device)
        if self.invariant:  # the same kernel for one row as for a subtree
            pad = self.classes.padded(len(rows)) - len(rows)
            if pad:
                h = torch.cat([h, h[:1].expand(pad, -1)])
            w, b = self.lm_head.weight, self.lm_head.bias
            out = self.classes.apply(lambda x: torch.nn.functional.linear(x, w, b), h).float()
        else:
            out = self.lm_head(h).float()
        for i, r in enumerate(rows):
            self._row_logits[r] = out[i]
        return self._row_logits[node]

    @torch.inference_mode()
    def compact(self, kept_nodes: list[int]) -> None:
        """Keep the prefix plus the trie nodes `kept_nodes` (root first, in path order)."""
        p, n = self.length, self._pending
        contiguous = kept_nodes == list(range(len(kept_nodes)))
        offsets = None if contiguous else torch.tensor(kept_nodes)
        for layer in self.cache.layers:
            if not getattr(layer, "is_initialized", True) or layer.get_seq_length() == 0:
                continue
            if contiguous:
                if len(kept_nodes) < n:
                    layer.crop(-(n - len(kept_nodes)))
            elif isinstance(layer, GrowingLayer):
                layer.keep(p, offsets)
            else:
                keep = torch.tensor(
                    [*range(p), *(p + i for i in kept_nodes)], device=layer.keys.device
                )
                layer.keys = layer.keys.index_select(2, keep)
                layer.values = layer.values.index_select(2, keep)
                if hasattr(layer, "cumulative_length"):
                    layer.cumulative_length -= n - len(kept_nodes)
        self.length = p + len(kept_nodes)
        self._hidden = self._logits = self._prenorm = None
        self._row_logits = {}

    @torch.inference_mode()
    def time_pass(self, n: int) -> float:
        """Time one verification-shaped pass over n dummy tokens, then drop them from the cache."""
        import time

        trie = Trie(
            tokens=[0] * n,
            parents=[-1] + [0] * (n - 1),
            depths=[0] + [1] * (n - 1),
            sources=[()] * n,
            ranks=[0] * n,
            probs=[1.0] * n,
        )
        t = time.perf_counter()
        self.forward_trie(trie)
        self.logits_at(0)
        elapsed = time.perf_counter() - t
        self.compact([0])
        for layer in self.cache.layers:
            layer.crop(-1)
        self.length -= 1
        return elapsed

"""The model side of the engine: prefill, one forward pass over a flattened trie (through the
model's backend, backends.py), logits on demand, and compaction of the KV cache to the accepted
path. Position ids are prefix length + depth; the lm_head runs only on the nodes the acceptance
walk visits."""

from __future__ import annotations

import copy
import time

import torch

from swiftwriter.engine.passes.attention import folding
from swiftwriter.engine.passes.backends import backend_for
from swiftwriter.engine.passes.capture import PrenormCapture
from swiftwriter.engine.passes.kvcache import GrowingLayer, growing_cache
from swiftwriter.engine.passes.kvshift import KeyShifter
from swiftwriter.engine.passes.leanpass import compute_dtype
from swiftwriter.engine.passes.quant import is_quantized
from swiftwriter.engine.passes.tree import Trie


def execution_device(module) -> torch.device:
    """Where a module computes: accelerate's hook says so for offloaded (meta) weights."""
    hook = getattr(module, "_hf_hook", None)
    device = getattr(hook, "execution_device", None) if hook is not None else None
    if device is not None:
        return torch.device(device) if not isinstance(device, torch.device) else device
    param = next(module.parameters(), None)
    return param.device if param is not None else torch.device("cpu")


def to_host(*tensors: torch.Tensor) -> list[torch.Tensor]:
    """The tensors in host memory after one wait for the device (none on a CPU): the step's
    one synchronisation, so nothing else in a step stalls the device's queue."""
    if all(t.device.type == "cpu" for t in tensors):
        return list(tensors)
    if not all(t.device.type == "cuda" for t in tensors):
        return [t.cpu() for t in tensors]
    out = [t.to("cpu", non_blocking=True) for t in tensors]
    for device in {t.device for t in tensors}:
        torch.cuda.current_stream(device).synchronize()
    return out


# Rows the lm_head computes with the root: its children and theirs, breadth first. A call
# reads the whole head weight whatever its few rows, so the first accepted draft's logits come
# almost free instead of costing a second call.
ROOT_ROWS = 16
QUANT_HEAD_ROWS = 4  # a head on stored blocks: the node and its first children


class ModelRunner:
    """Owns the KV cache of one generation and runs the target model over tries."""

    def __init__(
        self,
        model,
        prefill_chunk: int = 2048,
        lean: bool = True,
        invariant: bool = True,
        backend=None,
    ):
        """`backend`: another runner's, for runs verified together (`forward_together`)."""
        self.model = model
        self.config = model.config
        self.decoder = model.get_decoder()
        self.lm_head = model.get_output_embeddings()
        self.backend = backend or backend_for(model, lean=lean, invariant=invariant)
        self.lazy_head = self.backend.lazy_head  # else the model's own head runs in the pass
        self.device = execution_device(self.lm_head if self.lm_head is not None else model)
        self.input_device = execution_device(model.get_input_embeddings())
        self.dtype = (
            compute_dtype(model)
            if hasattr(model, "get_decoder")
            else next(model.parameters()).dtype
        )
        self.prefill_chunk = prefill_chunk
        self.cache = growing_cache(self.config, dtype=self.backend.cache_dtype)
        # True when every row of a pass equals the one-token pass bit for bit (invariant.py);
        # otherwise greedy output matches plain decoding only up to rounding.
        self.invariant = self.backend.invariant
        self.classes = self.backend.classes
        self.length = 0  # tokens in the cache
        self.highest = -1  # the largest position a call has written since the cache was new
        self._shifter: KeyShifter | None = None
        self._hidden: torch.Tensor | None = None
        self._logits: torch.Tensor | None = None
        self._row_logits: dict[int, torch.Tensor] = {}
        self._capture = None  # pre-norm hook, only when a drafter reads that state
        self._prenorm: torch.Tensor | None = None
        self.prefill_features: dict[str, torch.Tensor] = {}
        # runners copied from one prefilled prompt (`copy_from`) share this key and hold its
        # first `prompt_slots` slots alike until one of them slides (shift, reset)
        self.prompt_key: object | None = None
        self.prompt_slots = 0

    def enable_prenorm(self) -> None:
        """Keep the last decoder layer's output (before the final norm) of every pass."""
        if self._capture is None:
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

    @torch.inference_mode()
    def copy_from(self, other: ModelRunner) -> None:
        """Start where `other` stands (its cache copied, not shared): runs of one prompt
        prefill it once."""
        self.cache = copy.deepcopy(other.cache)
        self.length, self.highest = other.length, other.highest
        self.prefill_features = dict(other.prefill_features)
        if other.prompt_key is None:
            other.prompt_key, other.prompt_slots = object(), other.length
        self.prompt_key, self.prompt_slots = other.prompt_key, other.prompt_slots

    def reset(self) -> None:
        self.prompt_key = None
        self.cache = growing_cache(self.config, dtype=self.backend.cache_dtype)
        self.length = 0
        self.highest = -1

    def shift(self, keep: int, drop: int) -> str:
        """Drop cache slots [keep, keep + drop) and move the later entries to their new
        positions (kvshift.py): a window's slide without a prefill. Returns "" when done, else
        why this model's keys cannot be moved exactly (the cache is then untouched)."""
        if self._shifter is None:
            self._shifter = KeyShifter(self.model)
        why = self._shifter.refusal(keep, drop, self.highest)
        if why:
            return why
        self.prompt_key = None  # its early slots move
        self._shifter.apply(self.cache, keep, drop, self.length)
        self.length -= drop
        return ""

    @torch.inference_mode()
    def prefill(self, tokens: list[int]) -> None:
        for start in range(0, len(tokens), self.prefill_chunk):
            chunk = tokens[start : start + self.prefill_chunk]
            ids = torch.tensor([chunk], device=self.input_device)
            pos = torch.arange(self.length, self.length + len(chunk), device=self.input_device)[
                None
            ]
            if self.lazy_head:
                with folding(self.backend.fold):
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
            self.highest = max(self.highest, self.length - 1)

    @torch.inference_mode()
    def forward_trie(self, trie: Trie) -> None:
        """Run the model over all trie tokens; the cache grows by len(trie) until `compact`."""
        ids = torch.tensor([trie.tokens], device=self.input_device)
        pos = (torch.tensor(trie.depths) + self.length)[None].to(self.input_device)
        self._take(trie, self.backend.pass_over(self, trie, ids, pos))

    @staticmethod
    @torch.inference_mode()
    def forward_together(runners: list[ModelRunner], tries: list[Trie]) -> None:
        """Each runner's trie verified, in one pass where the runners share a backend that
        can (the invariant lean forward: every weight read once for all rows, each row
        computed as its own one-token pass computes it, so each generation is the one it
        would be alone), else one pass each."""
        lead = runners[0]
        alone = len(runners) == 1 or not getattr(lead.backend, "together", False)
        if alone or any(r.backend is not lead.backend for r in runners):
            for runner, trie in zip(runners, tries, strict=True):
                runner.forward_trie(trie)
            return
        device = lead.input_device
        ids = torch.tensor([t for trie in tries for t in trie.tokens], device=device)
        pos = torch.cat(
            [torch.tensor(trie.depths) + r.length for r, trie in zip(runners, tries, strict=True)]
        ).to(device)
        outs = lead.backend.pass_together(runners, tries, ids, pos)
        for runner, trie, out in zip(runners, tries, outs, strict=True):
            runner._take(trie, out)

    def _take(self, trie: Trie, out) -> None:
        """A pass's output for this runner's trie (backends.PassOutput)."""
        self.highest = max(self.highest, self.length + max(trie.depths))
        self._hidden, self._logits = out.hidden, out.logits
        if self._capture is not None:  # the lean forward returns it; the stock one is hooked
            self._prenorm = out.prenorm if out.prenorm is not None else self._capture.value[0]
        else:
            self._prenorm = None
        self._row_logits = {}
        self._pending = len(trie)

    @torch.inference_mode()
    def logits_at(self, node: int, trie: Trie | None = None) -> torch.Tensor:
        """float32 [V] logits after trie node `node`, computed on demand: the root with its
        first `ROOT_ROWS` descendants, then on a miss the node with its subtree, each in one
        lm_head call (it reads its full weight per call: a few rows cost little more than one)."""
        if self._logits is not None:
            return self._logits[node].float()
        cached = self._row_logits.get(node)
        if cached is not None:
            return cached
        if trie is None or len(trie) == 1:
            rows = [node]
        else:  # the root's first rows: the walk goes on below the root when a draft is right
            rows = trie.subtree(node, limit=self._head_rows(node))
        out = self.logits_rows(rows)
        for i, r in enumerate(rows):
            self._row_logits[r] = out[i]
        return self._row_logits[node]

    def _head_rows(self, node: int) -> int:
        """Rows one head call computes for a node and its subtree. A float head streams its
        weight whatever its few rows (more rows are nearly free); a head on stored blocks
        pays each row's integer products (0.25 ms a row for the default model, against 1.2 ms
        for the weight's one read), so it takes the node and its nearest children only."""
        if is_quantized(self.lm_head):
            return QUANT_HEAD_ROWS
        return ROOT_ROWS if node == 0 else 32

    @staticmethod
    @torch.inference_mode()
    def roots_together(runners: list[ModelRunner], tries: list[Trie]) -> None:
        """The rows `logits_at` would compute first for each runner's root, for all runners
        in one lm_head call (each row's bits are its own whatever the call's rows: the head
        on stored blocks, or the invariant kernel): runs verified together read the head's
        weight once instead of once per run."""
        wanted = [
            (r, [0] if len(t) == 1 else t.subtree(0, limit=r._head_rows(0)))
            for r, t in zip(runners, tries, strict=True)
            if r._logits is None and r._hidden is not None
        ]
        if len(wanted) < 2 or not all(r.invariant or is_quantized(r.lm_head) for r, _ in wanted):
            return
        hidden = torch.cat([r._hidden[rows] for r, rows in wanted])
        out = wanted[0][0]._head(hidden)
        start = 0
        for runner, rows in wanted:
            for i, row in enumerate(rows):
                runner._row_logits[row] = out[start + i]
            start += len(rows)

    @torch.inference_mode()
    def logits_rows(self, rows: list[int]) -> torch.Tensor:
        """float32 [len(rows), V] logits after these trie nodes, each row computed as a
        one-token pass computes it when the passes are invariant."""
        if self._logits is not None:
            return self._logits[rows].float()
        index = torch.tensor(rows, device=self._hidden.device)
        return self._head(self._hidden.index_select(0, index))

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        """float32 logits of final-norm hidden rows [rows, D]."""
        h = hidden.to(self.device)
        rows = range(h.shape[0])
        if is_quantized(self.lm_head):  # stored blocks: a row's bits whatever the row count
            out = self.lm_head(h)
        elif self.invariant:  # the same kernel for one row as for many
            pad = self.classes.padded(len(rows)) - len(rows)
            if pad:
                h = torch.cat([h, h[:1].expand(pad, -1)])
            w, b, product = self.lm_head.weight, self.lm_head.bias, self.backend.product
            out = self.classes.apply(lambda x: product(x, w, b), h)[: len(rows)]
        else:
            out = self.lm_head(h)
        finish = self.backend.finish  # the model's own logit post-processing, if any
        return (out if finish is None else finish(out)).float()

    def features(self, kind: str, n: int) -> torch.Tensor | None:
        """The first n rows of the state `feature_at` reads, for every node of the last pass."""
        feature = self._hidden if kind == "final" else self._prenorm
        return None if feature is None else feature[:n]

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

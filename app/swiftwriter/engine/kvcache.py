"""A KV cache that grows in place: transformers' `DynamicCache` concatenates the whole cache on
every forward pass (tens of ms per step at a few thousand tokens on a CPU); this one writes new
keys and values into a preallocated buffer and hands out views. Compaction after acceptance
moves only the accepted nodes. A layer can also keep a second copy of its keys and values laid out
for the batch-invariant attention (invariant.py)."""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from swiftwriter.engine.invariant import BLOCK


def attention_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the invariant attention computes in: the model's for float32 and bfloat16;
    float32 for float16, whose CPU products change kernels with every row count."""
    return torch.float32 if dtype == torch.float16 else dtype


class GrowingLayer(DynamicLayer):
    """One layer's keys/values in a buffer of capacity >= length, doubled when full but never
    past `limit` (the model's context) unless a pass needs more: memory stays bounded."""

    def __init__(self, initial_capacity: int = 512, limit: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.capacity = initial_capacity
        self.limit = limit
        self.length = 0
        self._k = self._v = None
        self.mirror = False  # keep the invariant attention's copies (set before the first update)
        self._kt = self._vb = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        self.is_initialized = True

    def _ensure(self, needed: int, like_k: torch.Tensor, like_v: torch.Tensor) -> None:
        if self._k is not None and needed <= self._k.shape[-2]:
            return
        cap = max(self.capacity, needed)
        while cap < needed:
            cap *= 2
        if self._k is not None:
            cap = max(cap, 2 * self._k.shape[-2])
        if self.limit is not None:
            cap = min(cap, max(self.limit, needed))
        b, h, _, d = like_k.shape
        new_k = like_k.new_empty(b, h, cap, d)
        new_v = like_v.new_empty(b, h, cap, like_v.shape[-1])
        if self._k is not None and self.length:
            new_k[:, :, : self.length] = self._k[:, :, : self.length]
            new_v[:, :, : self.length] = self._v[:, :, : self.length]
        self._k, self._v = new_k, new_v
        if self.mirror:
            self._grow_mirror(cap)

    def _grow_mirror(self, cap: int) -> None:
        """Copies laid out for the batch-invariant attention, in whole blocks, zero beyond what
        was written (attention reads whole blocks; masked slots must be finite): keys
        transposed [heads, dim, blocks * BLOCK] (scores are one product per head over a
        contiguous operand), values [blocks, heads, BLOCK, dim + 1] with a column of ones (block
        sums are one batched product)."""
        blocks = -(-(cap + 1) // BLOCK)
        _, h, _, d = self._k.shape
        dtype = attention_dtype(self._k.dtype)
        kt = self._k.new_zeros(h, d, blocks * BLOCK, dtype=dtype)
        vb = self._v.new_zeros(blocks, h, BLOCK, self._v.shape[-1] + 1, dtype=dtype)
        vb[..., -1] = 1.0
        if self._kt is not None:
            old = min(self._vb.shape[0], blocks)
            kt[:, :, : old * BLOCK] = self._kt[:, :, : old * BLOCK]
            vb[:old] = self._vb[:old]
        self._kt, self._vb = kt, vb

    def _write_mirror(self, start: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        stop = start + keys.shape[-2]
        if stop + 1 > self._kt.shape[-1]:
            self._grow_mirror(stop)
        self._kt[:, :, start:stop] = keys[0].transpose(1, 2)
        at = start
        while at < stop:
            block, offset = divmod(at, BLOCK)
            end = min(stop, (block + 1) * BLOCK)
            self._vb[block, :, offset : offset + end - at, :-1] = values[
                0, :, at - start : end - start
            ]
            at = end

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = key_states.shape[-2]
        self._ensure(self.length + n, key_states, value_states)
        self._k[:, :, self.length : self.length + n] = key_states
        self._v[:, :, self.length : self.length + n] = value_states
        if self._kt is not None:
            self._write_mirror(self.length, key_states, value_states)
        self.length += n
        return self.keys, self.values

    def block_views(self, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The mirror's first `length` slots (a multiple of BLOCK): keys transposed [heads,
        dim, length], values [length / BLOCK, heads, BLOCK, dim + 1] with their ones column;
        slots past what was written read as zeros."""
        if self._kt is None or length > self._kt.shape[-1]:
            self._grow_mirror(length)
        return self._kt[:, :, :length], self._vb[: length // BLOCK]

    @property
    def keys(self):
        return None if self._k is None else self._k[:, :, : self.length]

    @keys.setter
    def keys(self, value):  # DynamicLayer.__init__/reset assign None
        if value is None:
            self._k, self._kt, self.length = None, None, 0
        else:
            raise AttributeError("GrowingLayer keys are written through update()")

    @property
    def values(self):
        return None if self._v is None else self._v[:, :, : self.length]

    @values.setter
    def values(self, value):
        if value is None:
            self._v = self._vb = None
        else:
            raise AttributeError("GrowingLayer values are written through update()")

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:
            raise ValueError("crop takes a negative count")
        self.length = max(0, self.length + tokens_to_remove)

    def keep(self, prefix: int, offsets: torch.Tensor) -> None:
        """Keep [0, prefix) plus the entries at prefix + offsets (sorted, offsets[0] >= 0)."""
        if self._k is None:
            return
        src = offsets.to(self._k.device) + prefix
        m = src.numel()
        self._k[:, :, prefix : prefix + m] = self._k.index_select(2, src)
        self._v[:, :, prefix : prefix + m] = self._v.index_select(2, src)
        if self._kt is not None:
            dst = torch.arange(prefix, prefix + m, device=src.device)
            self._kt[:, :, prefix : prefix + m] = self._kt.index_select(2, src)
            self._vb[dst // BLOCK, :, dst % BLOCK] = self._vb[src // BLOCK, :, src % BLOCK]
        self.length = prefix + m


def growing_cache(config, initial_capacity: int = 512) -> DynamicCache:
    """A DynamicCache whose layers grow in place (full-attention decoders: Llama, Qwen2, ...)."""
    cache = DynamicCache(config=config)
    n_layers = len(cache.layers) if cache.layers else config.num_hidden_layers
    if any(getattr(layer, "is_sliding", False) for layer in cache.layers):
        return cache  # sliding-window layers keep transformers' own logic
    limit = getattr(config, "max_position_embeddings", None)
    limit = limit if isinstance(limit, int) and limit > 0 else None
    cache.layers = [GrowingLayer(initial_capacity, limit) for _ in range(n_layers)]
    return cache

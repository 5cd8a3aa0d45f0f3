"""A KV cache that grows in place: transformers' `DynamicCache` concatenates the whole cache on
every forward pass (tens of ms per step at a few thousand tokens on a CPU); this one writes new
keys and values into a preallocated buffer and hands out views. Compaction after acceptance
moves only the accepted nodes; a batch-invariant pass writes each trie row's path in place
(invariant.attend_paths)."""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


class BufferLayer(DynamicLayer):
    """One layer's keys and values in a preallocated buffer [1, heads, capacity, dim], of which
    the first `length` slots count; subclasses decide how the capacity grows (`_needs`)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.length = 0
        self._k = self._v = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        self.is_initialized = True

    def _capacity(self, needed: int) -> int:
        raise NotImplementedError

    def _ensure(self, needed: int, like_k: torch.Tensor, like_v: torch.Tensor) -> None:
        """Room for `needed` slots, the counted ones copied over when the buffer is replaced."""
        if self._k is not None and needed <= self._k.shape[-2]:
            return
        cap = self._capacity(needed)
        b, h, _, d = like_k.shape
        new_k = like_k.new_empty(b, h, cap, d)
        new_v = like_v.new_empty(b, h, cap, like_v.shape[-1])
        if self._k is not None and self.length:
            new_k[:, :, : self.length] = self._k[:, :, : self.length]
            new_v[:, :, : self.length] = self._v[:, :, : self.length]
        self._k, self._v = new_k, new_v

    def _write(self, start: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Write [1, heads, n, dim] keys and values at slots start..start + n (room made)."""
        n = keys.shape[-2]
        self._ensure(start + n, keys, values)
        self._k[:, :, start : start + n] = keys
        self._v[:, :, start : start + n] = values

    @property
    def keys(self):
        return None if self._k is None else self._k[:, :, : self.length]

    @keys.setter
    def keys(self, value):  # DynamicLayer.__init__/reset assign None
        if value is not None:
            raise AttributeError(f"{type(self).__name__} keys are written through its methods")
        self._k, self.length = None, 0

    @property
    def values(self):
        return None if self._v is None else self._v[:, :, : self.length]

    @values.setter
    def values(self, value):
        if value is not None:
            raise AttributeError(f"{type(self).__name__} values are written through its methods")
        self._v = None

    def get_seq_length(self) -> int:
        return self.length


class GrowingLayer(BufferLayer):
    """One layer's keys/values in a buffer of capacity >= length, doubled when full but never
    past `limit` (the model's context) unless a pass needs more: memory stays bounded."""

    def __init__(self, initial_capacity: int = 512, limit: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.capacity = initial_capacity
        self.limit = limit

    def _capacity(self, needed: int) -> int:
        cap = max(self.capacity, needed)
        while cap < needed:
            cap *= 2
        if self._k is not None:
            cap = max(cap, 2 * self._k.shape[-2])
        if self.limit is not None:
            cap = min(cap, max(self.limit, needed))
        return cap

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self._write(self.length, key_states, value_states)
        self.length += key_states.shape[-2]
        return self.keys, self.values

    def first(self, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Views of the first `count` slots [1, heads, count, dim] (written slots only)."""
        return self._k[:, :, :count], self._v[:, :, :count]

    def write(self, slot: int, key: torch.Tensor, value: torch.Tensor) -> None:
        """Overwrite one written slot with a token's key and value [heads, dim]."""
        self._k[0, :, slot] = key
        self._v[0, :, slot] = value

    def write_rows(self, start: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Overwrite written slots from `start` with rows' keys and values [rows, heads, dim]."""
        stop = start + keys.shape[0]
        self._k[0, :, start:stop] = keys.transpose(0, 1)
        self._v[0, :, start:stop] = values.transpose(0, 1)

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

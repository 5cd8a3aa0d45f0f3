"""A KV cache that grows in place: transformers' `DynamicCache` concatenates the whole cache on
every forward pass (tens of ms per step at a few thousand tokens on a CPU); this one writes new
keys and values into a preallocated buffer and hands out views. Compaction after acceptance
moves only the accepted nodes; a batch-invariant pass writes each trie row's path in place
(invariant.attend_paths), or reads the keys as tiles kept in step with every write (`tiles`,
for the tree-attention kernel)."""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


class BufferLayer(DynamicLayer):
    """One layer's keys and values in a preallocated buffer [1, heads, capacity, dim], of which
    the first `length` slots count; subclasses decide how the capacity grows (`_needs`)."""

    TILE = 16  # keys per tile of the tree-attention kernel's layout (native.key_tiles)

    def __init__(self, dtype: torch.dtype | None = None, **kwargs):
        super().__init__(**kwargs)
        self.dtype = dtype  # what the buffers hold (None: the first keys' dtype)
        self.length = 0
        self._k = self._v = None
        self._kt = None  # the keys as tiles, once `tiles` was asked for

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
        new_k = like_k.new_empty(b, h, cap, d, dtype=self.dtype or like_k.dtype)
        new_v = like_v.new_empty(b, h, cap, like_v.shape[-1], dtype=self.dtype or like_v.dtype)
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
        self._retile(start, start + n)

    def tiles(self, pairs: bool = False) -> torch.Tensor:
        """The keys as the tree-attention kernel reads them: float32 [heads, blocks, dim, 16],
        key j of a head at [j // 16, :, j % 16], or with `pairs` bfloat16 [heads, blocks,
        dim / 2, 16, 2] (native.key_tiles); from the first call on, every write to the keys
        updates its slots here too."""
        if self._kt is None:
            heads, dim = self._k.shape[1], self._k.shape[-1]
            shape = (dim // 2, self.TILE, 2) if pairs else (dim, self.TILE)
            dtype = torch.bfloat16 if pairs else torch.float32
            self._kt = self._k.new_zeros(heads, 0, *shape, dtype=dtype)
            self._retile(0, self.length)
        if (self._kt.dim() == 5) != pairs:
            raise ValueError("the key tiles were laid out for the other layout")
        return self._kt

    def value_buffer(self) -> torch.Tensor:
        """The values' whole buffer [1, heads, capacity, dim] (the first `length` written)."""
        return self._v

    def _grow_tiles(self) -> None:
        """Key tiles for the buffers' whole capacity (where there are tiles)."""
        kt = self._kt
        if kt is None:
            return
        need = -(-self._k.shape[-2] // self.TILE)
        if kt.shape[1] < need:
            grown = kt.new_zeros(kt.shape[0], need, *kt.shape[2:])
            grown[:, : kt.shape[1]] = kt
            self._kt = grown

    def _retile(self, start: int, stop: int) -> None:
        if self._kt is None or stop <= start:
            return
        tile = self.TILE
        self._grow_tiles()
        kt = self._kt
        keys = self._k[0]  # [heads, capacity, dim]
        if kt.dim() == 5:  # bfloat16 pairs: [heads, capacity, dim / 2, 2]
            keys = keys.unflatten(-1, (-1, 2))
        if stop - start <= 2 * tile:  # a pass's few rows: one or two slices
            for block in range(start // tile, (stop - 1) // tile + 1):
                a, b = max(start, block * tile), min(stop, (block + 1) * tile)
                kt[:, block, :, a - block * tile : b - block * tile] = keys[:, a:b].transpose(1, 2)
        else:
            slots = torch.arange(start, stop, device=kt.device)
            kt[:, slots // tile, :, slots % tile] = keys[:, start:stop].to(kt.dtype).transpose(0, 1)

    @property
    def keys(self):
        return None if self._k is None else self._k[:, :, : self.length]

    @keys.setter
    def keys(self, value):  # DynamicLayer.__init__/reset assign None
        if value is not None:
            raise AttributeError(f"{type(self).__name__} keys are written through its methods")
        self._k, self._kt, self.length = None, None, 0

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
        if self.keys.dtype != key_states.dtype:  # a narrower cache: the caller's attention
            return self.keys.to(key_states.dtype), self.values.to(value_states.dtype)
        return self.keys, self.values

    def buffers(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(keys, values, key tiles): the whole buffers, for a native writer (`room_for_one`
        checked, the length counted by the caller)."""
        return self._k, self._v, self._kt

    def room_for_one(self) -> bool:
        """Whether one more row fits the buffers and the key tiles as they are (`append`'s
        three copies, or a caller that writes them itself and then counts it)."""
        return self.room_for(1)

    def room_for(self, rows: int) -> bool:
        """Whether `rows` more rows fit the buffers and the key tiles as they are."""
        stop, kt = self.length + rows, self._kt
        return (
            self._k is not None
            and stop <= self._k.shape[-2]
            and (kt is None or (stop - 1) // self.TILE < kt.shape[1])
        )

    def make_room(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Buffers and key tiles grown to take these rows ([1, heads, rows, dim], not written),
        for a caller that writes them itself and then counts them."""
        if not self.is_initialized:
            self.lazy_initialization(keys, values)
        if not self.room_for(keys.shape[-2]):
            self._ensure(self.length + keys.shape[-2], keys, values)
            self._grow_tiles()

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """A pass's rows' keys and values [rows, heads, dim] after the written slots (`update`
        without the views it returns; one row, the usual case, in three copies: the key, the
        value, and the key's place in the tiles)."""
        start, kt = self.length, self._kt
        if keys.shape[0] != 1 or not self.room_for_one():
            self.update(keys.transpose(0, 1)[None], values.transpose(0, 1)[None])
            return
        self._k[0, :, start] = keys[0]
        self._v[0, :, start] = values[0]
        if kt is not None:
            key = keys[0] if kt.dim() == 4 else keys[0].unflatten(-1, (-1, 2))
            kt[:, start // self.TILE, :, start % self.TILE] = key
        self.length = start + 1

    def first(self, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Views of the first `count` slots [1, heads, count, dim] (written slots only)."""
        return self._k[:, :, :count], self._v[:, :, :count]

    def write(self, slot: int, key: torch.Tensor, value: torch.Tensor) -> None:
        """Overwrite one written slot with a token's key and value [heads, dim]."""
        self._k[0, :, slot] = key
        self._v[0, :, slot] = value
        self._retile(slot, slot + 1)

    def write_rows(self, start: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Overwrite written slots from `start` with rows' keys and values [rows, heads, dim]."""
        stop = start + keys.shape[0]
        self._k[0, :, start:stop] = keys.transpose(0, 1)
        self._v[0, :, start:stop] = values.transpose(0, 1)
        self._retile(start, stop)

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
        self._retile(prefix, prefix + m)
        self.length = prefix + m

    def drop_span(self, start: int, count: int, length: int, turn) -> None:
        """Remove slots [start, start + count) and move slots [start + count, length) down by
        `count`, their keys through `turn` (keys [1, heads, n, dim] -> new keys) on the way: a
        sliding window's cache edit (kvshift.py)."""
        if self._k is None or count <= 0:
            return
        moved = length - start - count
        keys = turn(self._k[:, :, start + count : length])
        values = self._v[:, :, start + count : length].clone()  # the spans overlap
        self._k[:, :, start : start + moved] = keys
        self._v[:, :, start : start + moved] = values
        self.length = start + moved
        self._retile(start, start + moved)


def growing_cache(
    config, initial_capacity: int = 512, dtype: torch.dtype | None = None
) -> DynamicCache:
    """A DynamicCache whose layers grow in place. Sliding-window layers keep every key too
    (transformers' own drop the oldest, so a rejected draft could not be rolled back): the
    window is applied by the attention instead, transformers' masks reading absolute positions
    and the lean pass cutting each row's keys (invariant.attend_paths). `dtype`: what the
    buffers hold when it is not the activations' (a model on stored blocks: bfloat16)."""
    cache = DynamicCache(config=config)
    n_layers = len(cache.layers) if cache.layers else config.num_hidden_layers
    limit = getattr(config, "max_position_embeddings", None)
    limit = limit if isinstance(limit, int) and limit > 0 else None
    cache.layers = [GrowingLayer(initial_capacity, limit, dtype=dtype) for _ in range(n_layers)]
    return cache

"""TokenSwift's dynamic partial KV cache for drafting.

A draft pass attends to a small per-KV-head selection of the full cache; verification keeps
using the full cache, so the output never changes (only the drafts get cheaper). Per layer and
KV head the selection holds:

- `sink` first tokens (attention sinks),
- the top tokens by query·key score, `budget - sink - recent` of them,
- the recent part: seeded with the newest `recent // 2` tokens at each selection, then every
  token the full cache gains is appended to it. When it would outgrow its `recent` share (or the
  whole selection its `budget`), the selection is made again from the full cache.

The query. The newest token's real query exists only inside the draft pass itself, so by
default the score uses a proxy: the mean of the last `proxy_keys` keys of that head. Those keys
are already cached, carry RoPE phases close to the newest position, and point where the recent
text's attention points, at the cost of one matrix-vector product per head. A caller that holds
real queries (e.g. captured from the verification pass) passes them to `update(queries=...)`:
per layer (1, q_heads, head_dim) or (q_heads, head_dim), post-rotary; grouped query heads are
summed onto their KV head (the sum of the group's scores).

API (all a drafting head needs):

    partial = PartialCache(model.config, budget=4096, sink=16, recent=256)
    partial.update(runner.cache.layers)          # after each compaction (committed tokens only)
    h = partial.draft_hidden(model, [token_id], [position])   # [1, hidden], pre-norm
    h = partial.draft_from_runner(runner, token_id)             # both at once, real position

`partial.cache` is a transformers `DynamicCache`, accepted by any stock forward as
`cache=partial.cache`; tokens a draft pass feeds are attended to but never kept. `reset()` after
the full cache is rebuilt (a context slide); a shrinking full cache is detected and reselected.
The full cache is only read: selection gathers into new tensors."""

from __future__ import annotations

import torch
from transformers import DynamicCache

from swiftwriter.engine.passes import BufferLayer, execution_device


class PartialLayer(BufferLayer):
    """Selected keys/values of one layer, with their real positions, in a buffer with spare room
    for the tokens of a draft pass (written after the selection, never counted in)."""

    def __init__(self, spare: int = 16):
        super().__init__()
        self.spare = spare
        self.positions: torch.Tensor | None = None  # (kv_heads, length) real positions

    def _capacity(self, needed: int) -> int:
        return needed + self.spare

    def load(self, keys: torch.Tensor, values: torch.Tensor, positions: torch.Tensor, capacity):
        """Replace the contents with a selection (keys/values (1, H, S, d), positions (H, S))."""
        self.is_initialized, self.device = True, keys.device
        self._k = None
        self.length = 0
        self._ensure(max(capacity, keys.shape[-2]), keys, values)
        self._write(0, keys, values)
        self.length = keys.shape[-2]
        self.positions = positions.clone()

    def append(self, keys: torch.Tensor, values: torch.Tensor, first_position: int) -> None:
        """Append committed tokens (the same for every head) to the recent part."""
        n = keys.shape[-2]
        self._write(self.length, keys, values)
        self.length += n
        heads = keys.shape[1]
        pos = torch.arange(first_position, first_position + n, device=self.positions.device)
        self.positions = torch.cat([self.positions, pos.expand(heads, n)], dim=1)

    def update(self, key_states, value_states, *args, **kwargs):
        """A draft pass: its tokens are attended to, written after the selection, not kept."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        q = key_states.shape[-2]
        self._write(self.length, key_states, value_states)
        return self._k[:, :, : self.length + q], self._v[:, :, : self.length + q]

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("a partial cache is re-selected, never cropped")


class PartialCache:
    """A per-KV-head selection of the full cache for cheap draft passes (see the module doc)."""

    def __init__(self, config, budget: int, sink: int = 16, recent: int = 256, proxy_keys: int = 8):
        if budget < sink + recent or recent < 2:
            raise ValueError("budget must hold the sinks and the recent part (recent >= 2)")
        self.budget, self.sink, self.recent, self.proxy_keys = budget, sink, recent, proxy_keys
        self.top = budget - sink - recent
        self.cache = DynamicCache(config=config)
        n_layers = len(self.cache.layers) if self.cache.layers else config.num_hidden_layers
        self.cache.layers = [PartialLayer() for _ in range(n_layers)]
        self.seen = 0  # full-cache tokens covered (selected from or appended)
        self.recent_count = 0
        self.reselections = 0

    @property
    def length(self) -> int:
        return self.cache.layers[0].length

    def reset(self) -> None:
        self.seen = self.recent_count = 0

    def positions(self, layer: int = 0) -> torch.Tensor:
        """(kv_heads, length) real positions held for `layer`, per head."""
        return self.cache.layers[layer].positions

    @torch.inference_mode()
    def update(self, full_layers, queries=None) -> bool:
        """Follow the full cache (its committed tokens); True when this call re-selected."""
        total = full_layers[0].get_seq_length()
        new = total - self.seen
        if (
            self.seen == 0
            or new < 0
            or self.recent_count + new > self.recent
            or self.length + new > self.budget
        ):
            self._select(full_layers, queries, total)
            return True
        if new:
            for layer, full in zip(self.cache.layers, full_layers, strict=True):
                layer.append(
                    full.keys[:, :, self.seen : total],
                    full.values[:, :, self.seen : total],
                    self.seen,
                )
            self.recent_count += new
            self.seen = total
        return False

    def _select(self, full_layers, queries, total: int) -> None:
        seed = min(self.recent // 2, total)
        for li, (layer, full) in enumerate(zip(self.cache.layers, full_layers, strict=True)):
            keys, values = full.keys[:, :, :total], full.values[:, :, :total]
            heads, dim = keys.shape[1], keys.shape[-1]
            device = keys.device
            if total <= self.budget:
                index = torch.arange(total, device=device).expand(heads, total)
            else:
                sinks = torch.arange(self.sink, device=device).expand(heads, self.sink)
                recent = torch.arange(total - seed, total, device=device).expand(heads, seed)
                middle = keys[0, :, self.sink : total - seed].float()  # (H, M, d)
                q = self._query(keys, None if queries is None else queries[li], heads)
                scores = torch.einsum("hmd,hd->hm", middle, q)
                k = min(self.top, scores.shape[1])
                top = scores.topk(k, dim=1).indices.sort(dim=1).values + self.sink
                index = torch.cat([sinks, top, recent], dim=1)
            gather = index[None, :, :, None].expand(1, heads, index.shape[1], dim)
            layer.load(
                keys.gather(2, gather),
                values.gather(2, index[None, :, :, None].expand(1, heads, -1, values.shape[-1])),
                index,
                self.budget,
            )
        self.seen = total
        self.recent_count = seed
        self.reselections += 1

    def _query(self, keys: torch.Tensor, query, heads: int) -> torch.Tensor:
        """(H, d) float query per KV head: the caller's queries grouped, or the key proxy."""
        if query is None:
            return keys[0, :, -self.proxy_keys :].float().mean(dim=1)
        q = query.float().reshape(-1, keys.shape[-1])  # (q_heads, d)
        return q.reshape(heads, q.shape[0] // heads, -1).sum(dim=1)

    @torch.inference_mode()
    def draft_hidden(self, model, token_ids, positions) -> torch.Tensor:
        """Run the decoder over the partial cache for `token_ids` at their real `positions`;
        returns the last decoder layer's output before the final norm, [len(token_ids), hidden]."""
        decoder = model.get_decoder()
        captured: dict[str, torch.Tensor] = {}

        def hook(_module, _args, output):
            captured["h"] = output[0] if isinstance(output, tuple) else output

        device = execution_device(model.get_input_embeddings())
        handle = decoder.layers[-1].register_forward_hook(hook)
        try:
            decoder(
                input_ids=torch.tensor([list(token_ids)], device=device),
                position_ids=torch.tensor([list(positions)], device=device),
                cache=self.cache,
                use_cache=True,
            )
        finally:
            handle.remove()
        return captured["h"][0]

    def draft_from_runner(self, runner, token_id: int, queries=None) -> torch.Tensor:
        """Sync with a ModelRunner's full cache and draft from its newest token ([1, hidden])."""
        self.update(runner.cache.layers, queries)
        return self.draft_hidden(runner.model, [token_id], [runner.length])

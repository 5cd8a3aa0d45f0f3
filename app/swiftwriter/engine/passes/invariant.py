"""Batch-invariant arithmetic for verification passes: a trie node's hidden state and logits come
out bit for bit as the one-token pass computes them for the same token after the same prefix,
whatever the trie's size and shape and whichever other rows share the pass.

Why it is needed: a matrix product, a norm or an attention kernel may reduce in an order that
depends on how many rows and keys it is given (another kernel for one row than for four, keys
split into blocks by their index in the buffer). In float32 the two results differ in the last
bits and greedy choices almost never change; in bfloat16 and float16 they differ by whole
logits units, top-2 ties flip, and speculation writes another text than plain decoding.

The design, every piece fixed by construction or by a measurement on the loaded model:
- Linear layers see a row count inside one measured *kernel class* (`RowClasses`): a pass of
  fewer rows is padded, a larger one is split into chunks of that class. Rows are independent
  in a matrix product, so a row's result depends only on the kernel.
- Attention gives every row what plain decoding computes for that token. With the native
  tree-attention kernel (native.py, `attend_tiles`) by construction: each row's result is a
  function of its own key sequence, the prefix and then its root-to-row path (`PathTable`),
  and the prefix is read once for all rows. Without it (`attend_paths`): per row, the SDPA
  call plain decoding makes, one query over the prefix followed by the row's path laid out in
  the cache exactly as plain decoding lays it out (`PathPlan`); a tree pass then pays one such
  call per row.
- Rotary tables are built once per position (`RotaryTable`), never per pass.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


class RotaryTable:
    """cos/sin per absolute position, each computed once by the model's own rotary embedding
    and never again, so a position gets the same values in every pass (a per-pass computation
    vectorises differently by the pass's length, and so would recomputing the table).

    `rotary(like, positions)` is the embedding's forward (Gemma 3's bound to a layer type);
    `splits`: positions one computation must not straddle (longrope switches to its long
    factors by the largest position of a call: leanpass._rope_splits)."""

    def __init__(self, rotary, like: torch.Tensor, length: int, splits: tuple[int, ...] = ()):
        self.rotary = rotary
        self.like = like
        self.splits = splits
        self.cos, self.sin = self._range(0, length)

    def _range(self, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        cuts = [start, *(s for s in self.splits if start < s < stop), stop]
        parts = []
        for a, b in zip(cuts, cuts[1:], strict=False):
            pos = torch.arange(a, b, device=self.like.device)[None]
            cos, sin = self.rotary(self.like, pos)
            parts.append((cos[0, :, None, :], sin[0, :, None, :]))  # [L, 1, d]
        if len(parts) == 1:
            return parts[0]
        return torch.cat([c for c, _ in parts]), torch.cat([s for _, s in parts])

    def __call__(
        self, positions: torch.Tensor, last: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`last`: the largest position, when the caller knows it (reading it from a device
        tensor would wait for the device)."""
        need = (int(positions.max()) if last is None else last) + 1
        have = self.cos.shape[0]
        if need > have:  # past the model's context: append, never recompute
            cos, sin = self._range(have, max(need, 2 * have))
            self.cos, self.sin = torch.cat([self.cos, cos]), torch.cat([self.sin, sin])
        return self.cos[positions], self.sin[positions]


class RowClasses:
    """Row counts that one matrix-product kernel serves here: [low, high], measured on the
    model's own projections (`measure`). `rows(n)` says how to lay out a pass of n rows: padded
    to `low`, or split into chunks of at most `high` (each at least `low`)."""

    def __init__(self, low: int, high: int):
        if not 1 <= low <= high:
            raise ValueError(f"bad row class [{low}, {high}]")
        self.low, self.high = low, high

    def __repr__(self) -> str:
        return f"RowClasses({self.low}, {self.high})"

    def padded(self, n: int) -> int:
        """Rows a pass of n real rows runs with: at least `low`, and above `high` a multiple
        of equal chunks that each stay inside the class."""
        if n <= self.high:
            return max(n, self.low)
        count = -(-n // self.high)
        return count * max(self.low, -(-n // count))

    def chunks(self, n: int) -> list[tuple[int, int]]:
        """(start, stop) pieces of a padded pass of n rows, each inside [low, high]."""
        if n <= self.high:
            return [(0, n)]
        count = -(-n // self.high)
        size = n // count
        return [(i * size, (i + 1) * size) for i in range(count)]

    def apply(self, fn, x: torch.Tensor) -> torch.Tensor:
        """fn over the rows of x (already padded to >= low), chunked to stay in the class."""
        pieces = self.chunks(x.shape[0])
        if len(pieces) == 1:
            return fn(x)
        return torch.cat([fn(x[a:b]) for a, b in pieces])


def probe_rows(weight: torch.Tensor, rows: int, gen: torch.Generator):
    """Inputs that make a product's summation order visible in its output, and the output
    column each row is aimed at. Row i targets column j: noise everywhere, plus two entries
    whose products with W[j] cancel exactly (a = W[j,k2] s, b = -W[j,k1] s, s a power of two),
    each 2^16 times the final sum. Small terms added while the big one is in the accumulator
    are rounded to its grid, so kernels that group the terms differently give visibly
    different results, even after rounding to bfloat16."""
    w = weight.detach().float().cpu()
    out_dim, width = w.shape
    x = torch.randn(rows, width, generator=gen)
    target = torch.randint(0, out_dim, (rows,), generator=gen)
    typical = float(w.abs().mean()) * width**0.5 + 1e-30
    for i in range(rows):
        j = int(target[i])
        ks = torch.randperm(width, generator=gen)[:2].sort().values
        w1, w2 = float(w[j, ks[0]]), float(w[j, ks[1]])
        if w1 == 0.0 or w2 == 0.0:
            continue
        scale = 2.0 ** round(torch.tensor(2.0**16 * typical / abs(w1 * w2)).log2().item())
        x[i, ks[0]], x[i, ks[1]] = w2 * scale, -w1 * scale
    return x.to(weight.device, weight.dtype), target


def measure_classes(probes, max_rows: int = 48) -> RowClasses:
    """The widest run of row counts [low, high] (low as small as possible, up to 8) in which
    every product gives each row the same bits whatever the row count and the row's place in
    the batch. `probes`: (fn, weight [out, in]) pairs; fn(x) = x @ weight.T (+ bias) as the
    pass computes it. Kernel choice depends on shapes, not values; `probe_rows` makes two
    kernels' different summation orders show, and every count runs over all `max_rows` test
    rows (in batches of that count, each row at another place)."""
    gen = torch.Generator(device="cpu").manual_seed(1234)
    same = [True] * (max_rows + 1)  # same[m]: m rows per batch give what m - 1 rows give
    with torch.inference_mode():
        for fn, weight in probes:
            x, target = probe_rows(weight, max_rows, gen)
            index = target.to(x.device)[:, None]
            prev = None
            for m in range(1, max_rows + 1):
                order = torch.arange(-(-max_rows // m) * m) % max_rows
                got = None
                for start in range(0, order.numel(), m):
                    rows = order[start : start + m].to(x.device)
                    out = fn(x[rows])
                    if got is None:
                        got = out.new_empty(max_rows, out.shape[-1])
                    got[rows] = out
                got = got.gather(1, index)
                if prev is not None and not torch.equal(got, prev):
                    same[m] = False
                prev = got
    best = None
    for low in range(1, 9):
        high = low
        while high < max_rows and same[high + 1]:
            high += 1
        if best is None or high - low > best.high - best.low + 2:
            best = RowClasses(low, high)
        if high >= max_rows:
            break
    return best


class PathPlan:
    """The order a pass's rows attend in, built once per pass from the trie's ancestor mask.

    Plain decoding reaches a trie node with the prefix and then the node's ancestors cached
    side by side, and attends over exactly those keys. A pass computes each row the same way:
    rows are visited depth first, and before a row attends, the cache slots right after the
    prefix are rewritten (where they differ) to hold the row's root-to-row path, so the row's
    keys are plain decoding's keys in plain decoding's places. `steps` lists, per row, the
    (slot offset, source row) writes and the key count; afterwards the slots go back to row
    order, which is what compaction expects."""

    def __init__(self, allowed: torch.Tensor | None, n: int, prefix: int):
        self.n, self.prefix = n, prefix
        if allowed is None or n == 1:
            self.steps: list[tuple[int, int, tuple[tuple[int, int], ...]]] = [(0, prefix + 1, ())]
            self.rewrites = False
            return
        # a row's ancestors in index order: parents always come before their children
        paths = [[j for j, seen in enumerate(row) if seen] for row in allowed.tolist()]
        children: list[list[int]] = [[] for _ in range(n)]
        for i in range(1, n):
            children[paths[i][-2]].append(i)
        holds, steps, stack = list(range(n)), [], [0]
        while stack:
            row = stack.pop()
            stack.extend(reversed(children[row]))
            path = paths[row]
            writes = tuple((j, r) for j, r in enumerate(path) if holds[j] != r)
            for j, r in writes:
                holds[j] = r
            steps.append((row, prefix + len(path), writes))
        self.steps = steps
        self.rewrites = any(writes for _, _, writes in steps)
        # row -> its place in the visiting order, to put the outputs back in row order
        self.unvisit = torch.tensor([row for row, _, _ in steps]).argsort()


def attend_paths(
    q, k, v, layer, plan: PathPlan, scaling: float, window: int | None = None, softcap=None
) -> torch.Tensor:
    """q [n, hq, d]; k, v [n, hk, d]: this pass's rows, already cached in row order after the
    prefix (`layer`: a kvcache.GrowingLayer) -> attention output [n, hq * d].

    Each row is one SDPA call over the prefix and its own path, the call plain decoding makes
    for that token (the same kernel, shapes, strides and keys, so the same bits). In bfloat16
    and float16 the call folds a group's query heads into query rows of their K/V head:
    SDPA's native grouped-query path there took 0.69 ms per layer for one query over 1,000
    keys on a CPU with AVX512-BF16, the folded call 0.14 ms (float32: the same either way).

    `window`: a sliding-window layer's width (a row sees its last `window` keys, itself
    included, as transformers' sliding mask lets it; the cache keeps every key so a rejected
    draft rolls back); `softcap`: Gemma 2's attention logit soft-capping, which SDPA cannot
    do: that row's call is then transformers' eager attention on the folded heads."""
    hq, d = q.shape[1], q.shape[2]
    hk = k.shape[1]
    folded = q.dtype != torch.float32 or softcap is not None
    out = []
    for row, length, writes in plan.steps:
        for slot, source in writes:
            layer.write(plan.prefix + slot, k[source], v[source])
        keys, values = layer.first(length)
        if window is not None and length > window:
            keys, values = keys[:, :, length - window :], values[:, :, length - window :]
        if softcap is not None:
            query = q[row].reshape(1, hk, hq // hk, d)
            out.append(_eager(query, keys, values, scaling, softcap))
        elif folded:  # a group's query heads as rows of their K/V head
            query = q[row].reshape(1, hk, hq // hk, d)
            out.append(F.scaled_dot_product_attention(query, keys, values, scale=scaling))
        else:
            query = q[row].reshape(1, hq, 1, d)
            out.append(
                F.scaled_dot_product_attention(query, keys, values, scale=scaling, enable_gqa=True)
            )
    if plan.rewrites:
        layer.write_rows(plan.prefix, k, v)
    if plan.n == 1:
        return out[0].reshape(1, -1)
    o = torch.stack([x.reshape(-1) for x in out])  # [n, hq * d] in visiting order
    return o.index_select(0, plan.unvisit.to(o.device))


def _eager(query, keys, values, scaling: float, softcap: float) -> torch.Tensor:
    """transformers' eager attention with soft-capped logits, op for op (Gemma 2)."""
    weights = torch.matmul(query, keys.transpose(2, 3)) * scaling
    weights = torch.tanh(weights / softcap) * softcap
    weights = F.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(weights, values)


class PathTable:
    """Each row's root-to-row path as the tree-attention kernel reads it: `paths` int32
    [n, depth] (pass-row indices, ancestors first, the row itself last, zero-padded) and
    `lengths` int32 [n]; built once per pass from the trie's ancestor mask."""

    def __init__(self, allowed: torch.Tensor | None, n: int, prefix: int):
        self.n, self.prefix = n, prefix
        if allowed is None or n == 1:
            self.paths = torch.zeros(1, 1, dtype=torch.int32)
            self.lengths = torch.ones(1, dtype=torch.int32)
            return
        allowed = allowed.cpu()
        lengths = allowed.sum(1)
        index = torch.arange(n).expand(n, n)
        # parents come before their children, so index order is root-to-row order
        order = torch.where(allowed, index, n).sort(dim=1).values[:, : int(lengths.max())]
        self.paths = torch.where(order < n, order, 0).to(torch.int32)
        self.lengths = lengths.to(torch.int32)


def attend_tiles(
    q, layer, table: PathTable, scaling: float, kernel, pairs: bool = False
) -> torch.Tensor:
    """q [n, hq, d]: this pass's rows, their keys and values already cached in row order after
    the prefix (`layer`: a kvcache.GrowingLayer) -> attention output [n, hq * d], from the
    native kernel (`kernel`: native.tree_attention(); `pairs`: native.pair_keys())."""
    tiles = layer.tiles(pairs)
    out = kernel(q, tiles, layer.value_buffer(), table.prefix, table.paths, table.lengths, scaling)
    return out.to(q.dtype).reshape(q.shape[0], -1)


def rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm op for op (each row reduces on its own; the fused
    `F.rms_norm` costs twice as much here)."""
    dtype = x.dtype
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(dtype)


class Rotary:
    """The model's rotary embedding from a per-position table, as `x * cos + rotate_half(x) *
    sin` with rotate_half folded into a rolled copy and a sign-flipped sin (same values, two
    ops fewer per layer)."""

    def __init__(self, table: RotaryTable):
        self.table = table

    def tables(
        self, positions: torch.Tensor, last: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.table(positions, last)
        half = sin.shape[-1] // 2
        signed = torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)
        return cos, signed

    @staticmethod
    def apply(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
        """x [..., d]; a table narrower than d rotates the first dims only (Phi-3's partial
        rotary factor), the rest passes through as transformers passes it; the result in x's
        dtype, as transformers casts it."""
        width = cos.shape[-1]
        if width == x.shape[-1]:  # back to x's dtype: OLMo 2's tables stay float32
            return (x * cos + x.roll(width // 2, -1) * signed_sin).to(x.dtype)
        turned = x[..., :width]
        turned = turned * cos + turned.roll(width // 2, -1) * signed_sin
        return torch.cat([turned.to(x.dtype), x[..., width:]], dim=-1)

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
- Attention is our own (`attend`): scores use products over the head dimension (one value per
  row and key, whatever the shapes); keys are reduced in blocks of BLOCK aligned to absolute
  positions, each block by one product of fixed shape that sums in key order, so the masked
  slots between a trie node's ancestors add exact zeros; blocks are merged by a sequential
  scan (`cumsum`). A pass never crosses a block boundary (`block_room`), so every key falls
  in the same block as in plain decoding. The cache keeps a second copy of keys and values
  laid out for these products (kvcache.GrowingLayer's mirror).
- Rotary tables are built once per position (`RotaryTable`), never per pass.
"""

from __future__ import annotations

import copy

import torch

BLOCK = 256  # keys per attention block: one K-block of a matrix product (sequential sums)


class RotaryTable:
    """cos/sin per absolute position, each computed once by the model's own rotary embedding
    and never again, so a position gets the same values in every pass (a per-pass computation
    vectorises differently by the pass's length, and so would recomputing the table)."""

    def __init__(self, rotary, like: torch.Tensor, length: int):
        self.rotary = rotary
        self.like = like
        self.cos, self.sin = self._range(0, length)

    def _range(self, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        pos = torch.arange(start, stop, device=self.like.device)[None]
        cos, sin = self.rotary(self.like, pos)
        return cos[0, :, None, :], sin[0, :, None, :]  # [L, 1, d]

    def __call__(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        need = int(positions.max()) + 1
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


class PassPlan:
    """What every layer's attention needs to know about one pass, built once per pass.

    Keys are cut into blocks of BLOCK by their index, which for cached tokens is their
    position; the pass's rows sit at prefix + row. A pass must fit in the block that holds the
    prefix's end (`block_room`), so each row's ancestors land in the same block as they do in
    plain decoding, only with masked slots between them, which add exact zeros."""

    def __init__(self, positions: torch.Tensor, allowed: torch.Tensor | None, prefix: int):
        device = positions.device
        n = positions.shape[0]
        if n > block_room(prefix):
            raise ValueError(f"a pass of {n} rows does not fit the block after {prefix} tokens")
        if allowed is None:
            allowed = torch.eye(n, dtype=torch.bool, device=device)
        self.blocks = prefix // BLOCK + 1
        first = (self.blocks - 1) * BLOCK
        visible = torch.zeros(n, BLOCK, dtype=torch.bool, device=device)
        visible[:, : prefix - first] = True
        visible[:, prefix - first : prefix - first + n] = allowed.to(device)
        self.bias = torch.zeros(n, BLOCK, device=device).masked_fill_(~visible, float("-inf"))
        self.n = n
        self._full = None

    def twice(self) -> PassPlan:
        """The plan of a one-row pass with that row given twice."""
        other = copy.copy(self)
        other.bias, other.n, other._full = self.bias.expand(2, -1), 2, None
        return other

    def bias_rows(self, groups: int) -> torch.Tensor:
        """The last block's additive mask [n * groups, BLOCK] in the folded query order (built
        once per pass, used by every layer)."""
        if self._full is None:
            self._full = self.bias.repeat_interleave(groups, 0)
        return self._full

    @property
    def keys(self) -> int:
        return self.blocks * BLOCK


def block_room(prefix: int) -> int:
    """Rows a pass after `prefix` cached tokens may have: up to the end of the prefix's block."""
    return BLOCK - prefix % BLOCK


def attend(
    q: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    plan: PassPlan,
    scaling: float,
) -> torch.Tensor:
    """q [n, hq, d]; keys transposed [hk, d, blocks * BLOCK] and values [blocks, hk, BLOCK,
    d + 1] in the model's dtype (the cache plus this pass's rows, a column of ones after each
    value, finite everywhere) -> attention output [n, hq * d], each row computed as in every
    other pass.

    Scores: one product per head over the head dimension. Softmax in float32 with one global
    maximum per row (exact in any order); then per block the weighted sum of values and,
    through the ones column, of the weights (a product over exactly BLOCK keys: the same
    kernel for a row in every pass); the blocks before the last merged by a sequential scan,
    then the last block added. Blocks before the last hold the same keys at the same places in
    every pass; in bfloat16 their weights are rounded to it before the product, as
    transformers' eager attention does. The last block is summed in float32."""
    n, hq, d = q.shape
    hk = keys.shape[0]
    g = hq // hk
    if n * g == 1:  # one query row: products of one row take another kernel than of two
        return attend(q.expand(2, -1, -1), keys, values, plan.twice(), scaling)[:1]
    c, B = values.shape[0], BLOCK
    q = (q.to(keys.dtype) * scaling).view(n, hk, g, d).permute(1, 0, 2, 3).reshape(hk, n * g, d)
    s = torch.bmm(q, keys).float()  # [hk, n*g, c*B]
    s[:, :, -B:] += plan.bias_rows(g)
    p = torch.exp(s - s.amax(-1, keepdim=True))
    # The last block holds the pass's rows between masked slots: only a float32 product sums
    # its keys one after another (bfloat16 kernels add neighbouring pairs first, and a trie
    # node's neighbours are not plain decoding's).
    out = torch.bmm(p[:, :, -B:], values[-1].float())  # [hk, n*g, d + 1]
    if c > 1:
        full = p[:, :, : (c - 1) * B].to(values.dtype).view(hk, n * g, c - 1, B)
        blocks = (full.permute(2, 0, 1, 3) @ values[:-1]).float()  # [c - 1, hk, n*g, d + 1]
        out = blocks.cumsum(0)[-1] + out
    o = out[..., :d] / out[..., d:]
    return o.view(hk, n, g, d).permute(1, 0, 2, 3).reshape(n, hq * d)


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

    def tables(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.table(positions)
        half = sin.shape[-1] // 2
        signed = torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)
        return cos, signed

    @staticmethod
    def apply(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
        return x * cos + x.roll(x.shape[-1] // 2, -1) * signed_sin

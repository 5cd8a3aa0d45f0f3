"""GGUF weights as they are stored: Linear layers and embeddings that compute from the file's
quantized blocks (quant_linear.cpp) instead of a bfloat16 or float32 copy.

Why: a writer's model file is 4-8 bits a weight; decoding it into bfloat16 takes 3-4x the
memory and, on a CPU, where a pass streams every weight from memory, 3-4x the time of each
token. The kernel keeps the blocks (rearranged once, same bits, same size), quantizes each
input row to int8 per block as llama.cpp does, and forms exact integer dot products; a row's
output depends on that row alone, whatever the pass holds, so a tree pass writes what plain
decoding writes (tests/engine/passes/test_quant.py).

Types that run as stored: Q4_0, Q4_1, Q8_0, Q4_K, Q5_K and Q6_K (the common Q4_K_M, Q5_K_M,
Q6_K and Q8_0 files, and the default model's Q4_1). Everything else is de-quantized once by the
loader (modelstore/gguf_weights.py), which says so."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from swiftwriter.engine.passes import native

SOURCE_NAME = "quant_linear.cpp"
# GGML's type ids of the types the kernel runs, by name
TYPES = {"Q4_0": 2, "Q4_1": 3, "Q8_0": 8, "Q4_K": 12, "Q5_K": 13, "Q6_K": 14}
NAMES = {v: k for k, v in TYPES.items()}
TILE = 16  # output rows packed side by side

# Where each type's packed group keeps what (quant_linear.cpp, "Packing"): (start, end, bytes
# per output row) regions, each made of consecutive runs of 16 rows' bytes. What selecting or
# joining rows of a packed weight moves.
REGIONS = {
    2: ((0, 256, 4), (256, 288, 2)),
    3: ((0, 256, 4), (256, 288, 2), (288, 320, 2)),
    8: ((0, 512, 4), (512, 544, 2)),
    12: ((0, 2048, 4), (2048, 2176, 1), (2176, 2432, 4), (2432, 2496, 2)),
    13: ((0, 2560, 4), (2560, 2688, 1), (2688, 2944, 4), (2944, 3008, 2)),
    14: ((0, 3072, 4), (3072, 3328, 1), (3328, 3360, 2)),
}
PATHS = {"best": 0, "scalar": 1, "avx2": 2, "avx512": 3}


def kernel():
    """The built extension, or None when it cannot be built here (`native.unavailable_for`
    says why)."""
    return native.extension(SOURCE_NAME)


def available() -> bool:
    return kernel() is not None


def unavailable() -> str | None:
    """Why the kernel cannot be used here (None when it can, or was not asked for yet)."""
    return native.extension_error(SOURCE_NAME) or (
        f"switched off ({native.DISABLE_ENV}=0)" if native.disabled() else None
    )


def path_name() -> str:
    """The product path this machine runs (e.g. "AVX-512 VNNI"), for the precision line."""
    module = kernel()
    return module.path_name(0) if module is not None else "unavailable"


def group_spec(qtype: int) -> tuple[int, int, int, int]:
    """(inputs per group, packed bytes per group of 16 rows, inputs per sum, stored bytes per
    block) of a type."""
    group_k, group_bytes, sum_k, block_bytes = kernel().group_spec(qtype)
    return group_k, group_bytes, sum_k, block_bytes


def block_size(qtype: int) -> int:
    """Inputs per stored block (32, or 256 for the K types)."""
    return 256 if qtype in (12, 13, 14) else 32


@dataclass
class QuantWeight:
    """A [n, k] weight kept as packed blocks: `packed` uint8 [ceil(n/16), k/group, bytes]."""

    packed: torch.Tensor
    qtype: int
    n: int
    k: int

    @classmethod
    def from_blocks(cls, blocks, qtype: int, k: int) -> QuantWeight:
        """From the file's blocks, one row of `k` inputs per output (uint8 [n, bytes])."""
        raw = torch.as_tensor(np.ascontiguousarray(blocks)).view(torch.uint8)
        raw = raw.reshape(raw.shape[0], -1)
        return cls(kernel().pack(raw, qtype, k), qtype, int(raw.shape[0]), k)

    @property
    def name(self) -> str:
        return NAMES[self.qtype]

    @property
    def nbytes(self) -> int:
        return self.packed.numel()

    def linear(self, x: torch.Tensor, bias=None, float_out: bool = False, path: str = "best"):
        """x [m, k] (float32 or bfloat16) times this weight's transpose: [m, n]."""
        return kernel().linear(x, self.packed, self.qtype, self.n, bias, float_out, PATHS[path])

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """float32 [len(ids), k]: these output rows de-quantized exactly as the gguf package
        de-quantizes them."""
        return kernel().dequantize(self.packed, self.qtype, ids.reshape(-1))

    def dense(self) -> torch.Tensor:
        return self.rows(torch.arange(self.n))

    def _row_major(self) -> list[np.ndarray]:
        """Each region's bytes as [n_padded, groups, chunks * bytes per row]."""
        tiles, groups, _ = self.packed.shape
        data = self.packed.numpy()
        out = []
        for start, end, per in REGIONS[self.qtype]:
            chunks = (end - start) // (TILE * per)
            part = data[:, :, start:end].reshape(tiles, groups, chunks, TILE, per)
            out.append(part.transpose(0, 3, 1, 2, 4).reshape(tiles * TILE, groups, chunks * per))
        return out

    @classmethod
    def _from_row_major(cls, parts: list[np.ndarray], qtype: int, n: int, k: int):
        tiles = -(-n // TILE)
        _, group_bytes, _, _ = group_spec(qtype)
        groups = parts[0].shape[1]
        packed = np.zeros((tiles, groups, group_bytes), dtype=np.uint8)
        for (start, end, per), part in zip(REGIONS[qtype], parts, strict=True):
            chunks = (end - start) // (TILE * per)
            full = np.zeros((tiles * TILE, groups, chunks * per), dtype=np.uint8)
            full[: part.shape[0]] = part[: tiles * TILE]
            full = full.reshape(tiles, TILE, groups, chunks, per).transpose(0, 2, 3, 1, 4)
            packed[:, :, start:end] = full.reshape(tiles, groups, end - start)
        return cls(torch.from_numpy(packed), qtype, n, k)

    def take(self, ids) -> QuantWeight:
        """The weight of these output rows only, in this order (same bits)."""
        index = np.asarray(ids, dtype=np.int64).reshape(-1)
        parts = [p[index] for p in self._row_major()]
        return QuantWeight._from_row_major(parts, self.qtype, len(index), self.k)

    @staticmethod
    def join(weights: list[QuantWeight]) -> QuantWeight:
        """Output rows of several weights of one type and width, one after the other."""
        first = weights[0]
        if any(w.qtype != first.qtype or w.k != first.k for w in weights):
            raise ValueError("only weights of one type and width join")
        n = sum(w.n for w in weights)
        if all(w.n % TILE == 0 for w in weights):
            return QuantWeight(torch.cat([w.packed for w in weights]), first.qtype, n, first.k)
        rows = [w._row_major() for w in weights]
        parts = [np.concatenate([r[i][: w.n] for r, w in zip(rows, weights, strict=True)])
                 for i in range(len(REGIONS[first.qtype]))]  # fmt: skip
        return QuantWeight._from_row_major(parts, first.qtype, n, first.k)


class QuantLinear(nn.Module):
    """A Linear whose weight stays in the file's blocks. Its output has the input's dtype; it
    holds no float copy of the weight (`weight` is not defined: code that needs the values
    asks `qweight.rows`)."""

    def __init__(self, qweight: QuantWeight, bias: torch.Tensor | None = None):
        super().__init__()
        self.qweight = qweight
        self.in_features, self.out_features = qweight.k, qweight.n
        self.bias = None if bias is None else nn.Parameter(bias.float(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        if flat.dtype not in (torch.float32, torch.bfloat16):
            flat = flat.float()
        out = self.qweight.linear(flat, self.bias)
        return out.reshape(*shape[:-1], self.out_features).to(x.dtype)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, {self.qweight.name}"


class QuantEmbedding(nn.Module):
    """An embedding table kept in the file's blocks: a token's row is de-quantized when it is
    looked up (a tied output head reads the same blocks through `head`)."""

    def __init__(self, qweight: QuantWeight, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.qweight = qweight
        self.num_embeddings, self.embedding_dim = qweight.n, qweight.k
        self.dtype = dtype

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        rows = self.qweight.rows(ids.reshape(-1).cpu())
        return rows.to(self.dtype).reshape(*ids.shape, self.embedding_dim)

    def head(self) -> QuantLinear:
        return QuantLinear(self.qweight)


def is_quantized(module) -> bool:
    return isinstance(module, (QuantLinear, QuantEmbedding))


def quantized_model(model) -> bool:
    """Whether this model computes from stored blocks anywhere."""
    return any(is_quantized(m) for m in model.modules())


def thread_invariant(model) -> bool:
    """Whether this model's passes give the same bits whatever the thread count: every
    product on stored blocks (each output computed by one thread, in one order). Float
    products (MKL, oneDNN) may split their sums across threads: a float32 cache was seen to
    differ in its last bits when the count changed between passes."""
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    return quantized_model(model) and not linears


def row_values(module, ids: torch.Tensor) -> torch.Tensor:
    """Rows of a Linear's or an embedding's weight as float32, whichever form it keeps."""
    if is_quantized(module):
        return module.qweight.rows(ids)
    return module.weight.detach()[ids].float()


class Rows:
    """A stored table's rows read on demand, as a float32 matrix is indexed (`table[ids]`,
    `.shape`, `.device`), for code that looks up a few rows of an embedding."""

    def __init__(self, module):
        self.module = module
        self.shape = (module.qweight.n, module.qweight.k)
        self.device = torch.device("cpu")
        self.dtype = torch.float32

    def __getitem__(self, ids) -> torch.Tensor:
        ids = torch.as_tensor(ids)
        return self.module.qweight.rows(ids.reshape(-1)).reshape(*ids.shape, self.shape[1])


def table_of(module):
    """A module's weight to index rows of: the float tensor, or the stored table's `Rows`."""
    return Rows(module) if is_quantized(module) else module.weight.detach()


def stored_bytes(model) -> int:
    """Bytes the model's packed blocks hold."""
    seen, total = set(), 0
    for m in model.modules():
        if is_quantized(m) and id(m.qweight.packed) not in seen:
            seen.add(id(m.qweight.packed))
            total += m.qweight.nbytes
    return total


def bits_per_weight(qtype: int) -> float:
    _, _, _, block_bytes = group_spec(qtype)
    return 8 * block_bytes / block_size(qtype)


def describe_types(model) -> str:
    """ "Q4_1 (4.5 bits) for 210 layers, Q8_0 for the embedding" style summary."""
    counts: dict[str, int] = {}
    for m in model.modules():
        if is_quantized(m):
            counts[m.qweight.name] = counts.get(m.qweight.name, 0) + 1
    return ", ".join(f"{n} x{c}" for n, c in sorted(counts.items(), key=lambda kv: -kv[1]))

"""The matrix-product kernel a CPU model's verification passes use, chosen by timing.

torch sends a float32 product on a CPU to MKL. Off Intel (measured on a 2-core AMD EPYC with
AVX-512) MKL's few-row kernels are slow and climb with the row count: streaming the default
model's decoder weights took 1.6x as long for 2 rows as for one and 2.6x for 8, so every tree
pass cost several one-token passes and no draft could pay. oneDNN's product (the kernel torch
already uses for bfloat16) on the same [in, out]-laid weights took about as long for 2 to 16
rows as MKL took for one, and on oneDNN's own packed weight layout (`PACKED`) bfloat16
products cost about 60% of that for 1 to 8 rows. A kernel is one summation order per row-count
class, so whichever is chosen, the batch-invariant pass measures its row classes on it
(invariant.RowClasses) and plain decoding runs on the same kernel: the choice changes speed,
never the text's exactness.
"""

from __future__ import annotations

import time
import weakref

import torch
from torch import nn
from torch.nn import functional as F

from swiftwriter.engine.passes.modelstate import settings_for

STOCK, ONEDNN, PACKED = "stock", "onednn", "onednn-packed"
PACK_ROWS = 4  # the row count oneDNN is told to expect when it lays a weight out for itself


def _onednn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


_PACKS: dict[int, tuple] = {}  # id(weight) -> (weak reference, weight version, packed copy)


def packed_weight(weight: torch.Tensor) -> torch.Tensor:
    """oneDNN's own blocked layout of a [out, in] weight, made once per weight (a copy: the
    model's weight stays as it is) and made again if the weight is changed in place."""
    key = id(weight)
    found = _PACKS.get(key)
    if found is not None and found[0]() is weight and found[1] == weight._version:
        return found[2]
    packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), PACK_ROWS)
    ref = weakref.ref(weight, lambda _, key=key: _PACKS.pop(key, None))
    _PACKS[key] = (ref, weight._version, packed)
    return packed


def _packed(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """oneDNN's product on its own weight layout: on a 2-core EPYC with AVX512-BF16 it streamed
    the default model's bfloat16 decoder weights in 12-14 ms for 1 to 8 rows, against 20-23 ms
    on the plain layout."""
    return torch.ops.mkldnn._linear_pointwise(x, packed_weight(weight), bias, "none", [], "")


_USABLE: dict[torch.dtype, bool] = {}


def onednn_ok(dtype: torch.dtype = torch.float32) -> bool:
    """oneDNN's linear op is in this torch build and takes this dtype on this CPU (float16
    needs AVX512-FP16 or AMX-FP16; tried once per dtype)."""
    if dtype not in _USABLE:
        ok = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
        if ok:
            try:
                _onednn(torch.ones(2, 4, dtype=dtype), torch.ones(3, 4, dtype=dtype), None)
            except RuntimeError:
                ok = False
        _USABLE[dtype] = ok
    return _USABLE[dtype]


_PACK_USABLE: dict[torch.dtype, bool] = {}


def packed_ok(dtype: torch.dtype = torch.float32) -> bool:
    """oneDNN's weight packing works here for this dtype (tried once per dtype)."""
    if dtype not in _PACK_USABLE:
        ok = onednn_ok(dtype) and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
        if ok:
            try:
                weight = torch.ones(3, 4, dtype=dtype)
                ok = torch.equal(
                    _packed(torch.ones(2, 4, dtype=dtype), weight, None),
                    torch.full((2, 3), 4, dtype=dtype),
                )
                _PACKS.pop(id(weight), None)
            except (RuntimeError, AttributeError):
                ok = False
        _PACK_USABLE[dtype] = ok
    return _PACK_USABLE[dtype]


def usable(kernel: str, dtype: torch.dtype) -> bool:
    """This kernel can run products in this dtype here."""
    if kernel == ONEDNN:
        return onednn_ok(dtype)
    if kernel == PACKED:
        return packed_ok(dtype)
    return True


def product(kernel: str):
    """fn(x [n, in], weight [out, in], bias) -> [n, out] on the named kernel."""
    return {ONEDNN: _onednn, PACKED: _packed}.get(kernel, F.linear)


def kernel_of(model) -> str:
    """The kernel this model's passes use (set at load time; stock when never measured)."""
    return settings_for(model).kernel or STOCK


def set_kernel(model, kernel: str) -> None:
    settings_for(model).kernel = kernel


def _linears(model: nn.Module) -> list[nn.Linear]:
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model
    return [
        m
        for m in decoder.modules()
        if isinstance(m, nn.Linear) and m.weight.device.type == "cpu" and m.weight.dim() == 2
    ]


def time_linears(
    linears: list[nn.Linear],
    rows=(1, 2, 8),
    reps: int = 3,
    among=(STOCK, ONEDNN, PACKED),
    keep_all: bool = False,
) -> dict[str, dict[int, float]]:
    """Seconds to run every one of these Linears once per row count, per kernel (best of
    `reps`), for the kernels `among` usable here; `keep_all` gives every repetition's seconds
    after an untimed first run (which packs the weights), to judge how steady they were."""
    if not linears:
        return {STOCK: {}}
    dtype = linears[0].weight.dtype
    kernels = [k for k in among if usable(k, dtype)]
    out: dict[str, dict[int, float]] = {k: {} for k in kernels}
    with torch.inference_mode():
        for n in rows:
            xs = [torch.randn(n, m.weight.shape[1], dtype=dtype) for m in linears]
            for kernel in kernels:
                fn = product(kernel)
                runs = []
                for _ in range(reps + keep_all):
                    start = time.perf_counter()
                    for x, m in zip(xs, linears, strict=True):
                        fn(x, m.weight, m.bias)
                    runs.append(time.perf_counter() - start)
                out[kernel][n] = runs[1:] if keep_all else min(runs)
    for m in linears:  # the packed copies were for the timing only
        _PACKS.pop(id(m.weight), None)
    return out


def time_kernels(
    model: nn.Module, rows=(1, 2, 8), reps: int = 3, keep_all: bool = False
) -> dict[str, dict[int, float]]:
    """`time_linears` over the model's decoder: a pass streams them all (about a second for
    the default model)."""
    return time_linears(_linears(model), rows, reps, keep_all=keep_all)


class KernelLinear(nn.Linear):
    """A Linear whose product runs on a chosen kernel (same values up to rounding)."""

    kernel = STOCK

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return product(self.kernel)(x, self.weight, self.bias)


def adopt_fastest(
    module: nn.Module, rows=(1, 4), reps: int = 5, among=(STOCK, ONEDNN, PACKED)
) -> str:
    """Run a small host-side module's Linears (the drafter's: its draft need not be exact) on
    the kernel that takes least time over `rows` here, timed once per module. MKL's float32
    few-row products off Intel took 0.7 ms for the drafter's 1,152 x 576 matrix, about five
    times oneDNN's; in bfloat16 oneDNN's packed layout took 30 us where its plain one took
    50. Returns the kernel."""
    if settings_for(module).kernel is not None:
        return kernel_of(module)
    linears = [
        m for m in module.modules() if isinstance(m, nn.Linear) and m.weight.device.type == "cpu"
    ]
    chosen = STOCK
    if linears:
        times = time_linears(linears, rows, reps, among=among)
        totals = {k: sum(t.values()) for k, t in times.items() if t}
        if totals:
            chosen = min(totals, key=lambda k: (totals[k], k != STOCK))
    for m in linears:
        if type(m) is nn.Linear:
            m.__class__ = KernelLinear
        if isinstance(m, KernelLinear):
            m.kernel = chosen
    set_kernel(module, chosen)
    return chosen


def choose_kernel(times: dict[str, dict]) -> str:
    """A oneDNN kernel when its 2-row product (what a padded one-token pass runs) costs no more
    than the stock one-row product and its 8-row product (a small tree) less than the stock
    one: plain decoding loses nothing and trees get cheaper; of two such, the one whose 2-row
    and 8-row products cost least together. Keys may be strings (read back from JSON)."""

    def at(kernel, n):
        found = times[kernel]
        return found.get(n, found.get(str(n)))

    if not times.get(STOCK):
        return STOCK
    stock_one, stock_tree = at(STOCK, 1), at(STOCK, 8)
    best, best_cost = STOCK, float("inf")
    for kernel in (ONEDNN, PACKED):
        if not times.get(kernel):
            continue
        two, tree = at(kernel, 2), at(kernel, 8)
        if two <= 1.05 * stock_one and tree < stock_tree and two + tree < best_cost:
            best, best_cost = kernel, two + tree
    return best

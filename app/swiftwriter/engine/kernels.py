"""The matrix-product kernel a CPU model's verification passes use, chosen by timing.

torch sends a float32 product on a CPU to MKL. Off Intel (measured on a 2-core AMD EPYC with
AVX-512) MKL's few-row kernels are slow and climb with the row count: streaming the default
model's decoder weights took 1.6x as long for 2 rows as for one and 2.6x for 8, so every tree
pass cost several one-token passes and no draft could pay. oneDNN's product (the kernel torch
already uses for bfloat16) on the same [in, out]-laid weights took about as long for 2 to 16
rows as MKL took for one. A kernel is one summation order per row-count class, so whichever
is chosen, the batch-invariant pass measures its row classes on it (invariant.RowClasses) and
plain decoding runs on the same kernel: the choice changes speed, never the text's exactness.
"""

from __future__ import annotations

import time

import torch
from torch import nn
from torch.nn import functional as F

STOCK, ONEDNN = "stock", "onednn"


def _onednn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


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


def product(kernel: str):
    """fn(x [n, in], weight [out, in], bias) -> [n, out] on the named kernel."""
    return _onednn if kernel == ONEDNN else F.linear


def kernel_of(model) -> str:
    """The kernel this model's passes use (set at load time; stock when never measured)."""
    return model.__dict__.get("_swiftwriter_kernel", STOCK)


def set_kernel(model, kernel: str) -> None:
    model.__dict__["_swiftwriter_kernel"] = kernel


def _linears(model: nn.Module) -> list[nn.Linear]:
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model
    return [
        m
        for m in decoder.modules()
        if isinstance(m, nn.Linear) and m.weight.device.type == "cpu" and m.weight.dim() == 2
    ]


def time_linears(
    linears: list[nn.Linear], rows=(1, 2, 8), reps: int = 3
) -> dict[str, dict[int, float]]:
    """Seconds to run every one of these Linears once per row count, per kernel (best of
    `reps`)."""
    if not linears:
        return {STOCK: {}}
    dtype = linears[0].weight.dtype
    kernels = [STOCK, ONEDNN] if onednn_ok(dtype) else [STOCK]
    out: dict[str, dict[int, float]] = {k: {} for k in kernels}
    with torch.inference_mode():
        for n in rows:
            xs = [torch.randn(n, m.weight.shape[1], dtype=dtype) for m in linears]
            for kernel in kernels:
                fn = product(kernel)
                best = float("inf")
                for _ in range(reps):
                    start = time.perf_counter()
                    for x, m in zip(xs, linears, strict=True):
                        fn(x, m.weight, m.bias)
                    best = min(best, time.perf_counter() - start)
                out[kernel][n] = best
    return out


def time_kernels(model: nn.Module, rows=(1, 2, 8), reps: int = 3) -> dict[str, dict[int, float]]:
    """`time_linears` over the model's decoder: a pass streams them all (about a second for
    the default model)."""
    return time_linears(_linears(model), rows, reps)


class KernelLinear(nn.Linear):
    """A Linear whose product runs on a chosen kernel (same values up to rounding)."""

    kernel = STOCK

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return product(self.kernel)(x, self.weight, self.bias)


def adopt_fastest(module: nn.Module, rows=(1, 4), reps: int = 5) -> str:
    """Run a small host-side module's Linears (the drafter's: its draft need not be exact) on
    the kernel that takes least time over `rows` here, timed once per module. MKL's float32
    few-row products off Intel took 0.7 ms for the drafter's 1,152 x 576 matrix, about five
    times oneDNN's. Returns the kernel."""
    if "_swiftwriter_kernel" in module.__dict__:
        return kernel_of(module)
    linears = [
        m for m in module.modules() if isinstance(m, nn.Linear) and m.weight.device.type == "cpu"
    ]
    chosen = STOCK
    if linears:
        times = time_linears(linears, rows, reps)
        if ONEDNN in times and sum(times[ONEDNN].values()) < sum(times[STOCK].values()):
            chosen = ONEDNN
    for m in linears:
        if type(m) is nn.Linear:
            m.__class__ = KernelLinear
        if isinstance(m, KernelLinear):
            m.kernel = chosen
    set_kernel(module, chosen)
    return chosen


def choose_kernel(times: dict[str, dict]) -> str:
    """oneDNN when its 2-row product (what a padded one-token pass runs) costs no more than the
    stock one-row product and its 8-row product (a small tree) less than the stock one: plain
    decoding loses nothing and trees get cheaper. Keys may be strings (read back from JSON)."""
    one = times.get(ONEDNN)
    if not one:
        return STOCK

    def at(kernel, n):
        found = times[kernel]
        return found.get(n, found.get(str(n)))

    stock_one, stock_tree = at(STOCK, 1), at(STOCK, 8)
    if at(ONEDNN, 2) <= 1.05 * stock_one and at(ONEDNN, 8) < stock_tree:
        return ONEDNN
    return STOCK

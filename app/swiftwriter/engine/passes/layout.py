"""Weight layout for CPU inference with a few tokens per pass.

`nn.Linear` keeps its weight as [out, in] and multiplies by its transpose. On CPUs (MKL, fp32)
that kernel can be several times slower for 1-32 rows than the same product against a
contiguous [in, out] matrix (the lm_head most of all), and 1-32 rows is exactly the shape of
decoding and tree verification. Storing each weight as the transposed view
of a contiguous [in, out] tensor keeps every value and the module code unchanged (still the
stock model; embeddings tied to the lm_head stay tied), and `F.linear` then takes the fast
kernel. Applied once at load time, so every method (ours and transformers' own) runs on it.
Where memory allows, the decoder Linears also keep the stock layout for passes of two or three
rows, where it is the faster one (FewRowLinear)."""

from __future__ import annotations

import time

import torch
from torch import nn


def transpose_linear_weights(model: nn.Module) -> int:
    """Re-lay every CPU Linear weight as [in, out]-contiguous; returns how many were changed."""
    replaced: dict[int, nn.Parameter] = {}
    with torch.no_grad():
        for module in model.modules():
            if not isinstance(module, nn.Linear):
                continue
            w = module.weight
            if w.device.type != "cpu" or w.dim() != 2 or w.stride(0) == 1 or w.is_meta:
                continue
            new = replaced.get(id(w))
            if new is None:
                new = nn.Parameter(w.detach().t().contiguous().t(), requires_grad=w.requires_grad)
                replaced[id(w)] = new
            module.weight = new
        # Keep tied parameters tied (an embedding sharing the lm_head's weight).
        for module in model.modules():
            w = getattr(module, "weight", None)
            if (
                isinstance(w, nn.Parameter)
                and id(w) in replaced
                and not isinstance(module, nn.Linear)
            ):
                module.weight = replaced[id(w)]
    return len(replaced)


class FewRowLinear(nn.Linear):
    """A Linear that also keeps its weight in the stock row-major [out, in] layout and uses that
    copy for passes of at most `few_rows` rows: with the weights streaming from memory (a
    whole model per pass, not one matrix hot in cache) MKL's kernel on that layout can cost
    about the same for 2-3 rows as for one, while the [in, out] layout costs more from 2 rows
    on and wins from 4 (`measure_few_rows` finds the crossing on the machine it runs on). A
    one-token draft then costs little more than plain decoding. The copy is a plain attribute: not a
    parameter, not in the state dict."""

    few_rows: int = 0
    weight_rows: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight_rows
        if w is not None and x.numel() <= self.few_rows * x.shape[-1]:
            return nn.functional.linear(x, w, self.bias)
        return nn.functional.linear(x, self.weight, self.bias)


def _decoder_linears(model: nn.Module) -> list[nn.Linear]:
    """The [in, out]-laid Linears other than the output head (whose one-row product is far
    faster on [in, out])."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return [
        m
        for m in model.modules()
        if isinstance(m, nn.Linear)
        and m is not head
        and m.weight.device.type == "cpu"
        and m.weight.dim() == 2
        and m.weight.stride(0) == 1
        and m.weight.shape[0] > 1
    ]


COPY_LIMIT = 3 << 29  # 1.5 GiB of copies at most: larger models keep the one layout


def _copy_bytes(linears: list[nn.Linear]) -> int:
    return sum(m.weight.numel() * m.weight.element_size() for m in linears)


def add_few_row_copies(model: nn.Module, few_rows: int, max_bytes: int = COPY_LIMIT) -> int:
    """Give each decoder Linear a row-major copy for passes of <= `few_rows` rows (see
    FewRowLinear); nothing when `few_rows` < 1 or the copies would exceed `max_bytes`.
    Returns how many Linears got one."""
    linears = _decoder_linears(model)
    if few_rows < 1 or not linears or _copy_bytes(linears) > max_bytes:
        return 0
    with torch.no_grad():
        for m in linears:
            if type(m) is nn.Linear:
                m.__class__ = FewRowLinear
            if isinstance(m, FewRowLinear):
                m.weight_rows = m.weight.detach().contiguous()
                m.few_rows = few_rows
    return sum(isinstance(m, FewRowLinear) for m in linears)


def measure_few_rows(
    model: nn.Module, candidates=(1, 2, 3, 4, 6, 8), reps: int = 3, max_bytes: int = COPY_LIMIT
) -> int:
    """The largest row count up to which the row-major copy is faster here, streaming all of
    the model's decoder Linears like a pass does (about a second for the default model);
    0 when it never is, or when the copies would not be made anyway (over `max_bytes`)."""
    measured = time_few_rows(model, candidates, reps, max_bytes)
    return few_rows_from(
        {n: {k: min(t) for k, t in times.items()} for n, times in measured.items()}
    )


def time_few_rows(
    model: nn.Module, candidates=(1, 2, 3, 4, 6, 8), reps: int = 3, max_bytes: int = COPY_LIMIT
) -> dict[int, dict[str, list[float]]]:
    """Seconds of each repetition (after an untimed first run) of streaming the decoder's
    Linears in both layouts, per row count, up to the first where row-major stops paying;
    {} when the copies would not be made."""
    linears = _decoder_linears(model)
    if not linears or _copy_bytes(linears) > max_bytes:
        return {}
    rows_major = [m.weight.detach().contiguous() for m in linears]
    measured: dict[int, dict[str, list[float]]] = {}
    with torch.no_grad():
        for n in candidates:
            xs = [torch.randn(n, m.weight.shape[1], dtype=m.weight.dtype) for m in linears]
            times = {}
            for name, weights in (("cols", [m.weight for m in linears]), ("rows", rows_major)):
                runs = []
                for _ in range(reps + 1):
                    t = time.perf_counter()
                    for x, w in zip(xs, weights, strict=True):
                        nn.functional.linear(x, w)
                    runs.append(time.perf_counter() - t)
                times[name] = runs[1:]
            measured[n] = times
            if min(times["rows"]) >= 0.95 * min(times["cols"]):
                break
    return measured


def few_rows_from(measured: dict[int, dict[str, float]]) -> int:
    """The largest row count of an unbroken run, from the smallest, where the row-major layout
    took under 95% of the [in, out] one ({rows: {"rows": s, "cols": s}})."""
    best = 0
    for n in sorted(measured):
        if measured[n]["rows"] >= 0.95 * measured[n]["cols"]:
            break
        best = n
    return best

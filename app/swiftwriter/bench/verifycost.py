"""How the cost of one verification pass grows with the number of tree tokens k, at a given
cached context: our batch-invariant path, our earlier path (in-place cache, native grouped-query
attention, [in, out] weights, lm_head only where needed) and stock transformers (DynamicCache,
4-D mask, full logits). `curve`: the runs' own pass over 1 to 64 rows relative to one row, the
shape the cost model (engine/decoding/estimate.py CostModel) learns per run, measured apart."""

from __future__ import annotations

import statistics
import time

import torch
from transformers import DynamicCache

from swiftwriter.engine.decoding.generator import context_length
from swiftwriter.engine.passes import ModelRunner

KS = (1, 4, 16, 32, 64)


def _star_mask(n: int, p: int, dtype) -> torch.Tensor:
    allowed = torch.ones(n, p + n, dtype=torch.bool)
    allowed[:, p:] = False
    allowed[:, p] = True  # every node sees the root
    allowed[torch.arange(n), p + torch.arange(n)] = True
    mask = torch.zeros(n, p + n, dtype=dtype)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


@torch.inference_mode()
def stock_costs(model, context: int, ks=KS, reps: int = 5) -> dict[int, float]:
    """Stock transformers: a forward over k tokens after `context` cached tokens (median)."""
    torch.manual_seed(0)
    prefix = torch.randint(100, 1000, (1, context))
    cache = DynamicCache(config=model.config)
    model(prefix, cache=cache, use_cache=True, logits_to_keep=1)
    dtype = next(model.parameters()).dtype
    out = {}
    for k in ks:
        ids = torch.randint(100, 1000, (1, k))
        pos = torch.full((1, k), context)
        pos[0, 1:] += 1
        mask = None if k == 1 else _star_mask(k, context, dtype)
        times = []
        for _ in range(reps + 1):
            t = time.perf_counter()
            model(ids, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True)
            times.append(time.perf_counter() - t)
            cache.crop(-k)
        out[k] = statistics.median(times[1:])
    return out


@torch.inference_mode()
def our_costs(
    model, context: int, ks=KS, reps: int = 5, invariant: bool = True
) -> dict[int, float]:
    """Our pass over k tokens after `context` cached ones (median); `invariant=False` times
    the earlier passes that take the fastest kernels for each size."""
    torch.manual_seed(0)
    runner = ModelRunner(model, invariant=invariant)
    runner.prefill(torch.randint(100, 1000, (context,)).tolist())
    out = {}
    for k in ks:
        times = [runner.time_pass(k) for _ in range(reps + 1)]
        out[k] = statistics.median(times[1:])
    return out


def relative(costs: dict[int, float]) -> dict[int, float]:
    return {k: v / costs[1] for k, v in costs.items()}


CURVE_KS = (1, 2, 4, 8, 16, 32, 64)
# Cached tokens the curve is measured after: a long take spends most of its steps with the
# window full (8,192 tokens on the default model), where attention's share of a row grows.
CURVE_CONTEXTS = (1000, 4000, 8000)


def curve_contexts(model, ks=CURVE_KS) -> list[int]:
    """The CURVE_CONTEXTS that leave room for the largest pass in the model's context."""
    limit = context_length(model.config)
    return [c for c in CURVE_CONTEXTS if limit is None or c + max(ks) <= limit]


@torch.inference_mode()
def curve(model, context: int, ks=CURVE_KS, reps: int = 3) -> dict[int, float]:
    """Seconds of the batch-invariant pass (forward and the root's lm_head, as a step's pass)
    over k rows after `context` cached tokens: the fastest of `reps`, the sizes taken in turns
    so that a busy moment of a shared machine lands on every size rather than on one."""
    torch.manual_seed(0)
    runner = ModelRunner(model, invariant=True)
    top = min(1000, model.config.vocab_size)
    runner.prefill(torch.randint(top // 10, top, (context,)).tolist())
    runner.time_pass(max(ks))  # first-call costs (allocations) out of the figures
    times: dict[int, list[float]] = {k: [] for k in ks}
    for _ in range(reps):
        for k in ks:
            times[k].append(runner.time_pass(k))
    return {k: min(t) for k, t in times.items()}


def format_curve(curves: dict[str, dict[int, dict[int, float]]]) -> str:
    """{dtype: {context: {k: seconds}}} as a table: ms of one row, then each k's ratio to it."""
    ks = sorted({k for by_context in curves.values() for c in by_context.values() for k in c})
    lines = [f"{'dtype':9} {'context':>7} {'1 row':>8} " + " ".join(f"{f'k={k}':>6}" for k in ks)]
    for dtype, by_context in curves.items():
        for context, costs in by_context.items():
            rel = relative(costs)
            lines.append(
                f"{dtype:9} {context:7d} {costs[1] * 1e3:6.1f}ms "
                + " ".join(f"{rel[k]:5.2f}x" for k in ks)
            )
    return "\n".join(lines)

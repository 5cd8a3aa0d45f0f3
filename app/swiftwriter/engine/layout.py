"""Weight layout for CPU inference with a few tokens per pass.

`nn.Linear` keeps its weight as [out, in] and multiplies by its transpose. On this CPU (MKL,
2 threads, fp32) that kernel is 2-4x slower for 1-32 rows than the same product against a
contiguous [in, out] matrix (the lm_head: 21 ms against 6 ms for one row), and 1-32 rows is
exactly the shape of decoding and tree verification. Storing each weight as the transposed view
of a contiguous [in, out] tensor keeps every value and the module code unchanged (still the
stock model; embeddings tied to the lm_head stay tied), and `F.linear` then takes the fast
kernel. Applied once at load time, so every method (ours and transformers' own) runs on it."""

from __future__ import annotations

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

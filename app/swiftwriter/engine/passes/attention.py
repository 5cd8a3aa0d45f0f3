"""Grouped-query attention for verification passes without copying keys and values.

With any attention mask, transformers' SDPA path expands grouped K/V heads (3 -> 9 on the
default model) before attending: on a CPU at a few thousand tokens of context that copy and
the wider product dominate a tree pass. For n > 1 query tokens this folds each group's query
heads into the query axis instead, (b, kv_heads * g, n, d) -> (b, kv_heads, g * n, d), with the
mask repeated g times along its query axis: the same arithmetic, on the cached K/V as they are.
transformers already does this for one query token (`pack_gqa`).

Registered as an attention implementation that behaves exactly like stock `sdpa` unless a pass
of ours switches folding on (`folding()`), so transformers' own `generate` on the same model
object runs the stock code. The folded mask is built once per pass and kept in the pass's own
context (no state outlives a pass)."""

from __future__ import annotations

import contextlib
import contextvars

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

NAME = "swiftwriter_sdpa"
# None outside our passes; inside one, that pass's folded masks (every layer shares one)
_FOLD: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "swiftwriter_fold", default=None
)


def folded_sdpa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    groups = getattr(module, "num_key_value_groups", 1)
    n = query.shape[2]
    masks = _FOLD.get()
    if (
        masks is None
        or groups == 1
        or n == 1
        or attention_mask is None
        or attention_mask.dim() != 4
        or attention_mask.shape[1] != 1
        or kwargs.get("position_bias") is not None
        or kwargs.get("softcap") is not None
    ):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    b, hq, _, d = query.shape
    q = query.reshape(b, hq // groups, groups * n, d)
    mask = _folded_mask(masks, attention_mask, key.shape[2], groups, query.dtype)
    out = torch.nn.functional.scaled_dot_product_attention(
        q, key, value, attn_mask=mask, dropout_p=0.0, scale=scaling
    )
    return out.reshape(b, hq, n, d).transpose(1, 2).contiguous(), None


def _folded_mask(masks: dict, mask: torch.Tensor, length: int, groups: int, dtype) -> torch.Tensor:
    """The pass's mask cut to the keys, as an additive float mask, repeated for the folded query
    heads: built by the first layer and reused by the others (kept with the mask object, which
    the pass holds, so its identity is not reused), instead of a copy and a bool conversion per
    layer."""
    key = (id(mask), length, groups, dtype)
    found = masks.get(key)
    if found is not None and found[0] is mask:
        return found[1]
    cut = mask[..., :length]
    if cut.dtype == torch.bool:  # what SDPA would do per call: -inf where not allowed
        cut = torch.zeros(cut.shape, dtype=dtype, device=cut.device).masked_fill_(
            ~cut, float("-inf")
        )
    folded = cut.repeat(1, 1, groups, 1)
    masks[key] = (mask, folded)
    return folded


def install(model) -> bool:
    """Use the folding implementation on `model` if it runs stock SDPA; True when installed."""
    if getattr(model.config, "_attn_implementation", None) == NAME:
        return True
    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    from transformers.masking_utils import (  # lazy: transformers' mask code, about 2 s
        AttentionMaskInterface,
        sdpa_mask,
    )
    from transformers.modeling_utils import (  # lazy: transformers' model code, about 2 s
        AttentionInterface,
    )

    AttentionInterface.register(NAME, folded_sdpa)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    try:
        model.set_attn_implementation(NAME)
    except (ValueError, AttributeError, TypeError):
        return False
    return getattr(model.config, "_attn_implementation", None) == NAME


@contextlib.contextmanager
def folding(enabled: bool = True):
    """Fold grouped query heads in the passes run inside (a fresh mask cache per pass)."""
    token = _FOLD.set({} if enabled else None)
    try:
        yield
    finally:
        _FOLD.reset(token)

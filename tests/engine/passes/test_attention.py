"""Folded grouped-query attention gives the stock result, and only inside our passes."""

from __future__ import annotations

import pytest
import torch
from swiftwriter.engine.passes import attention
from transformers import DynamicCache

from tests.conftest import build_tiny


def tree_pass(model, ids, fold: bool, prefix: int = 30, hidden=(5, 2), as_bool=False):
    cache = DynamicCache(config=model.config)
    model.model(input_ids=ids[:, :prefix], cache=cache, use_cache=True)
    n = ids.shape[1] - prefix
    allowed = torch.ones(n, prefix + n, dtype=torch.bool)
    allowed[:, prefix:] = torch.tril(torch.ones(n, n, dtype=torch.bool))
    allowed[hidden[0], prefix + hidden[1]] = False  # a branch: node 5 does not see node 2
    mask = torch.zeros(n, prefix + n).masked_fill_(~allowed, torch.finfo(torch.float32).min)
    if as_bool:
        mask = allowed
    calls = []
    original = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, **kw):
        calls.append((q.shape[1], k.shape[1]))
        return original(q, k, v, **kw)

    torch.nn.functional.scaled_dot_product_attention = spy
    try:
        with attention.folding(fold):
            out = model.model(
                input_ids=ids[:, prefix:],
                attention_mask=mask[None, None],
                position_ids=torch.arange(prefix, prefix + n)[None],
                cache=cache,
                use_cache=True,
            ).last_hidden_state
    finally:
        torch.nn.functional.scaled_dot_product_attention = original
    return out, calls


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_folded_attention_matches_stock(arch):
    model = build_tiny(arch, seed=4)
    ids = torch.randint(2, 256, (1, 42), generator=torch.Generator().manual_seed(0))
    stock, _ = tree_pass(model, ids, fold=False)
    assert attention.install(model) and model.config._attn_implementation == attention.NAME
    unfolded, calls = tree_pass(model, ids, fold=False)
    assert torch.equal(stock, unfolded)
    assert all(q == k for q, k in calls)  # outside our passes: stock (K/V expanded to 4 heads)
    folded, calls = tree_pass(model, ids, fold=True)
    assert torch.allclose(stock, folded, atol=1e-5)
    assert calls and all(q == k == 2 for q, k in calls)  # 4 query heads folded onto 2 KV heads


def test_folded_masks_follow_each_pass_and_accept_bool_masks():
    """Every layer of a pass shares one folded mask: a later pass with another mask of the same
    shape must not see the earlier one, and a bool mask means what SDPA makes of it."""
    model = build_tiny("llama", seed=4)
    ids = torch.randint(2, 256, (1, 42), generator=torch.Generator().manual_seed(0))
    stock_a, _ = tree_pass(model, ids, fold=False, hidden=(5, 2))
    stock_b, _ = tree_pass(model, ids, fold=False, hidden=(9, 7))
    assert not torch.allclose(stock_a, stock_b, atol=1e-4)
    assert attention.install(model)
    folded_a, _ = tree_pass(model, ids, fold=True, hidden=(5, 2))
    folded_b, _ = tree_pass(model, ids, fold=True, hidden=(9, 7))
    assert torch.allclose(folded_a, stock_a, atol=1e-5)
    assert torch.allclose(folded_b, stock_b, atol=1e-5)
    as_bool, calls = tree_pass(model, ids, fold=True, hidden=(9, 7), as_bool=True)
    assert calls and all(q == k == 2 for q, k in calls)
    assert torch.allclose(as_bool, stock_b, atol=1e-5)

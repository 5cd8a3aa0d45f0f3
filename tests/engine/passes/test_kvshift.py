"""A window's slide as a cache edit (kvshift.py): the shifted cache is what a fresh prefill of
the kept tokens at their new positions holds, for each family's rotary (partial rotary,
longrope's two factors, Gemma 3's table per layer type, Gemma 2, OLMo 2's float32 tables);
the key tiles of the tree-attention kernel follow the edit; where a turn could not be exact
the runner refuses and leaves the cache alone."""

from __future__ import annotations

import pytest
import torch
from swiftwriter.engine.passes import ModelRunner
from swiftwriter.engine.passes.kvcache import GrowingLayer
from swiftwriter.engine.passes.kvshift import refusal

from tests.engine.families import build_family

pytestmark = pytest.mark.usefixtures("one_thread")

TOKENS = [(7 * i + 3) % 250 + 2 for i in range(50)]


def context_free(name: str):
    """A family's tiny model whose attention outputs nothing (o_proj zero): every layer's keys
    and values then depend on the token and its position alone, so a shifted cache can be
    held against a fresh prefill in every layer, not only the first."""
    model = build_family(name, seed=1, max_positions=64)
    with torch.no_grad():
        for layer in model.get_decoder().layers:
            layer.self_attn.o_proj.weight.zero_()
    return model


def filled(model, tokens, chunk=8):
    # chunks of 8 never straddle longrope's switch at 16: each key has its position's factors
    runner = ModelRunner(model, prefill_chunk=chunk)
    runner.prefill(tokens)
    return runner


@pytest.mark.parametrize(
    "name", ["llama", "qwen3", "phi3", "phi3-longrope", "gemma3", "gemma2", "olmo2"]
)
def test_shifted_cache_is_a_fresh_prefill_at_the_new_positions(name):
    model = context_free(name)
    keep, drop = 6, 20  # longrope: positions 26.. turned from long factors to short below 16
    runner = filled(model, TOKENS)
    before = [layer.keys.clone() for layer in runner.cache.layers]
    assert runner.shift(keep, drop) == ""
    assert runner.length == len(TOKENS) - drop
    fresh = filled(model, TOKENS[:keep] + TOKENS[keep + drop :])
    for index, (got, want) in enumerate(zip(runner.cache.layers, fresh.cache.layers, strict=True)):
        assert got.length == want.length == len(TOKENS) - drop
        torch.testing.assert_close(got.keys, want.keys, rtol=0, atol=2e-6)
        torch.testing.assert_close(got.values, want.values, rtol=0, atol=2e-6)
        torch.testing.assert_close(
            got.keys[:, :, :keep], before[index][:, :, :keep], rtol=0, atol=0
        )
        # the moved keys really turned: their old values are far from the new ones
        assert (before[index][:, :, keep + drop :] - want.keys[:, :, keep:]).abs().max() > 0.05


def test_the_key_tiles_follow_the_edit():
    model = build_family("llama", seed=2, max_positions=64)
    for pairs in (False, True):
        runner = filled(model, TOKENS)
        layer = runner.cache.layers[0]
        layer.tiles(pairs)  # the kernel's layout exists before the edit, as in a run
        assert runner.shift(4, 17) == ""
        fresh = GrowingLayer(64)
        fresh.lazy_initialization(layer.keys, layer.values)
        fresh.update(layer.keys.clone(), layer.values.clone())
        n = layer.length
        got, want = layer.tiles(pairs), fresh.tiles(pairs)
        blocks = n // GrowingLayer.TILE
        assert torch.equal(got[:, :blocks], want[:, :blocks])
        tail = n - blocks * GrowingLayer.TILE
        assert torch.equal(got[:, blocks, ..., :tail, :] if pairs else got[:, blocks, :, :tail],
                           want[:, blocks, ..., :tail, :] if pairs else want[:, blocks, :, :tail])  # fmt: skip


def test_shifts_that_could_not_be_exact_are_refused_and_leave_the_cache_alone():
    longrope = build_family("phi3-longrope", seed=1, max_positions=64)
    runner = filled(longrope, TOKENS[:30])  # a call reached the switch at 16
    keys = runner.cache.layers[0].keys.clone()
    # keys at 10..15 may carry the long factors (a call reached 16): not movable exactly
    why = runner.shift(4, 6)
    assert "longrope" in why and runner.length == 30
    assert torch.equal(runner.cache.layers[0].keys, keys)
    assert filled(longrope, TOKENS[:14]).shift(4, 6) == ""  # no call reached the switch

    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    dynamic = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
            num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
            rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0},
        )
    )  # fmt: skip
    assert "dynamic" in refusal(dynamic)
    gpt2 = GPT2LMHeadModel(
        GPT2Config(vocab_size=64, n_embd=32, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=1)
    )
    assert "engine knows" in refusal(gpt2)  # learned absolute positions: nothing to turn
    assert refusal(build_family("gemma3")) == ""

"""The lean verification pass computes what transformers' decoder computes, for one token and
for trees, with and without merged projections, and generation through it is unchanged."""

from __future__ import annotations

import random

import pytest
import torch
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.history_source import HistorySource
from swiftwriter.engine.decoding.trie import Trie
from swiftwriter.engine.passes import backends
from swiftwriter.engine.passes.layout import add_few_row_copies, transpose_linear_weights
from swiftwriter.engine.passes.leanpass import LeanDecoder, merge_projections, supports
from swiftwriter.engine.passes.verify import ModelRunner

from tests.conftest import build_tiny


def tree(tokens: list[int], parents: list[int]) -> Trie:
    depths = [0] * len(parents)
    for i, p in enumerate(parents):
        depths[i] = 0 if p < 0 else depths[p] + 1
    n = len(tokens)
    return Trie(tokens, parents, depths, [()] * n, [0] * n, [1.0] * n)


TRIES = [
    tree([7], [-1]),
    tree([7, 9], [-1, 0]),
    tree([7, 9, 11, 12, 30], [-1, 0, 0, 1, 3]),  # two branches, one of depth 3
]


def hidden_states(model, trie: Trie, lean: bool) -> torch.Tensor:
    runner = ModelRunner(model, lean=lean)
    assert (runner.backend.name == "lean") == lean
    runner.prefill(list(range(3, 60)))
    runner.forward_trie(trie)
    return runner._hidden.clone()


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("trie", TRIES, ids=["one", "chain", "tree"])
def test_lean_pass_equals_the_stock_decoder(arch, trie):
    model = build_tiny(arch, seed=5)
    assert supports(model)
    want = hidden_states(model, trie, lean=False)
    torch.testing.assert_close(hidden_states(model, trie, lean=True), want, rtol=0, atol=1e-6)
    # the CPU layouts of the loader: [in, out] weights, row copies, merged projections
    transpose_linear_weights(model)
    add_few_row_copies(model, few_rows=2)
    assert merge_projections(model) == 2
    torch.testing.assert_close(hidden_states(model, trie, lean=True), want, rtol=0, atol=1e-5)
    torch.testing.assert_close(hidden_states(model, trie, lean=False), want, rtol=0, atol=1e-5)


def test_merged_projections_are_views_with_the_same_values():
    model = build_tiny("qwen2", seed=6)  # q/k/v with biases
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ids = torch.arange(2, 12)[None]
    with torch.no_grad():
        want = model(ids).logits
    merge_projections(model)
    attn = model.model.layers[0].self_attn
    assert attn.q_proj.weight.untyped_storage().data_ptr() == (
        attn.v_proj.weight.untyped_storage().data_ptr()
    )  # one tensor per layer: no second copy of the weights
    assert attn.k_proj.bias.untyped_storage().data_ptr() == (
        attn.q_proj.bias.untyped_storage().data_ptr()
    )
    after = model.state_dict()
    assert set(after) == set(before)
    for key, value in before.items():
        assert torch.equal(after[key], value), key
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, want, rtol=1e-5, atol=1e-5)
    assert merge_projections(model) == 0  # once is enough


def test_unsupported_models_keep_the_stock_forward():
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64))
    assert not supports(gpt2)
    assert merge_projections(gpt2) == 0
    hooked = build_tiny("llama", seed=7)
    handle = hooked.model.layers[1].register_forward_hook(lambda *a: None)
    assert not supports(hooked)  # a hook would silently stop firing
    assert ModelRunner(hooked).backend.name == "stock"
    handle.remove()
    assert ModelRunner(hooked).backend.name == "lean"
    assert LeanDecoder(hooked).groups == 2


def test_generation_through_the_lean_pass_is_unchanged(monkeypatch):
    """Greedy with drafts (passes of one to several rows) and seeded sampling: the same tokens
    with the lean pass as with transformers' forward."""
    model = build_tiny("llama", seed=8)
    transpose_linear_weights(model)
    add_few_row_copies(model, few_rows=2)
    merge_projections(model)
    rng = random.Random(4)
    prompt = [rng.randrange(2, 256) for _ in range(40)]

    def run(sampling, history=None):
        drafting = DraftSettings(sources=(), max_nodes=4, adaptive=False)
        sources = [HistorySource(sequences=[history])] if history else []
        gen = Generator(model, sampling, drafting, sources=sources, calibrate=False)
        return [t for ev in gen.generate(prompt, 50) for t in ev.tokens], gen.stats

    greedy = SamplingSettings(greedy=True, penalty=1.2, window=64)
    sampled = SamplingSettings(greedy=False, penalty=1.2, window=64, min_p=0.1, seed=3)
    plain, _ = run(greedy)
    history = prompt + plain  # drafts that are often right: passes of several rows
    lean_greedy, stats = run(greedy, history)
    lean_sampled, _ = run(sampled, history)
    assert lean_greedy == plain
    assert stats.forward_passes < 30
    monkeypatch.setattr(backends, "supports", lambda model: False)
    assert ModelRunner(model).backend.name == "stock"
    assert run(greedy)[0] == plain
    assert run(greedy, history)[0] == plain
    assert run(sampled, history)[0] == lean_sampled

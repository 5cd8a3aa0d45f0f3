"""The partial KV cache for draft passes: exact when the budget holds everything, sinks + top
+ recent per KV head otherwise, re-selection only when the recent part is full, and the full
cache never touched."""

from __future__ import annotations

import torch
from swiftwriter.bench.partial_cache import PartialCache
from swiftwriter.engine.passes.verify import ModelRunner


def prenorm_full(model, tokens):
    """The last decoder layer's output at the last token, from a plain uncached forward."""
    captured = {}
    handle = model.model.layers[-1].register_forward_hook(
        lambda _m, _a, out: captured.__setitem__("h", out[0] if isinstance(out, tuple) else out)
    )
    try:
        with torch.no_grad():
            model.model(input_ids=torch.tensor([tokens]))
    finally:
        handle.remove()
    return captured["h"][0, -1]


def snapshot(runner):
    return [(layer.keys.clone(), layer.values.clone()) for layer in runner.cache.layers]


def tokens(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(2, 250, (n,), generator=g).tolist()


def test_a_budget_that_holds_everything_is_exact(tiny_llama):
    text = tokens(60)
    runner = ModelRunner(tiny_llama)
    runner.prefill(text[:39])
    partial = PartialCache(tiny_llama.config, budget=128, sink=4, recent=16)
    before = snapshot(runner)
    h = partial.draft_from_runner(runner, text[39])
    assert h.shape == (1, tiny_llama.config.hidden_size)
    assert torch.allclose(h[0], prenorm_full(tiny_llama, text[:40]), atol=1e-5)
    for (k0, v0), layer in zip(before, runner.cache.layers, strict=True):  # full cache untouched
        assert torch.equal(k0, layer.keys) and torch.equal(v0, layer.values)
    assert runner.length == 39 and partial.length == 39
    # The full cache grows (committed tokens); the partial one follows, still exact.
    for end in (45, 52, 60):
        runner.prefill(text[runner.length : end - 1])
        h = partial.draft_from_runner(runner, text[end - 1])
        assert torch.allclose(h[0], prenorm_full(tiny_llama, text[:end]), atol=1e-5)
        assert partial.length == end - 1


def test_a_small_budget_keeps_sinks_top_and_recent_per_head(tiny_llama):
    text = tokens(200, seed=1)
    runner = ModelRunner(tiny_llama)
    runner.prefill(text[:-1])
    partial = PartialCache(tiny_llama.config, budget=48, sink=4, recent=16)
    h = partial.draft_from_runner(runner, text[-1])
    assert h.shape == (1, tiny_llama.config.hidden_size) and torch.isfinite(h).all()
    total = 199
    for li in range(tiny_llama.config.num_hidden_layers):
        pos = partial.positions(li)
        assert pos.shape == (2, 4 + 28 + 8)  # kv heads x (sinks + top share + recent seed)
        for head in pos.tolist():
            assert head[:4] == [0, 1, 2, 3]
            assert head[-8:] == list(range(total - 8, total))
            assert len(set(head)) == len(head) and max(head) < total
    # The selected keys are the full cache's keys at those positions.
    full = runner.cache.layers[0].keys
    pos = partial.positions(0)
    for head in range(2):
        assert torch.equal(partial.cache.layers[0].keys[0, head], full[0, head, pos[head]])


def test_queries_choose_the_top_tokens(tiny_llama):
    text = tokens(200, seed=2)
    runner = ModelRunner(tiny_llama)
    runner.prefill(text)
    partial = PartialCache(tiny_llama.config, budget=24, sink=4, recent=16)  # top share: 4
    wanted = [50, 120]  # one position per KV head
    queries = []
    for layer in runner.cache.layers:
        q = torch.stack([layer.keys[0, h, wanted[h]] * 100 for h in range(2)])
        queries.append(q.repeat_interleave(2, dim=0))  # 4 query heads, 2 per KV head
    partial.update(runner.cache.layers, queries)
    for li in range(len(runner.cache.layers)):
        for h in range(2):
            assert wanted[h] in partial.positions(li)[h].tolist()


def test_reselection_waits_for_the_recent_part(tiny_llama):
    text = tokens(140, seed=3)
    runner = ModelRunner(tiny_llama)
    runner.prefill(text[:100])
    partial = PartialCache(tiny_llama.config, budget=40, sink=4, recent=16)
    assert partial.update(runner.cache.layers) is True  # first selection, recent seeded with 8
    events = []
    for t in text[100:120]:
        runner.prefill([t])
        events.append(partial.update(runner.cache.layers))
    # 8 more tokens fill the recent share of 16; the 9th triggers the next selection.
    assert events[:8] == [False] * 8 and events[8] is True
    assert events[9:17] == [False] * 8 and events[17] is True
    assert partial.reselections == 3 and partial.length <= 40
    assert partial.positions(0)[0, -1].item() == runner.length - 1 and partial.seen == 120
    # A full cache rebuilt shorter (a context slide) is noticed and selected afresh.
    runner.reset()
    runner.prefill(text[:30])
    assert partial.update(runner.cache.layers) is True and partial.length == 30

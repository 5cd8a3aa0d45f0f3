"""KV compaction equals the cache plain decoding builds; cancellation; bad requests; a model
dispatched by accelerate with CPU and disk offload stays exact."""

from __future__ import annotations

import threading

import pytest
import torch
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.trie import Trie
from swiftwriter.engine.passes.verify import ModelRunner
from swiftwriter.errors import UserError


def test_compacted_cache_equals_sequential_cache(tiny_llama):
    prefix = [3, 17, 42, 8, 99, 5]
    # A trie: root, two children, grandchildren under the second child.
    trie = Trie(
        tokens=[5, 11, 12, 13, 14, 15],
        parents=[-1, 0, 0, 2, 2, 3],
        depths=[0, 1, 1, 2, 2, 3],
        sources=[()] * 6,
        ranks=[0] * 6,
        probs=[1.0] * 6,
        children=[{11: 1, 12: 2}, {}, {13: 3, 14: 4}, {15: 5}, {}, {}],
    )
    runner = ModelRunner(tiny_llama)
    runner.prefill(prefix[:-1])
    runner.forward_trie(trie)
    runner.compact([0, 2, 3, 5])  # keep the path root -> 12 -> 13 -> 15
    seq = ModelRunner(tiny_llama)
    seq.prefill(prefix + [12, 13, 15])
    assert runner.length == seq.length == len(prefix) + 3
    for a, b in zip(runner.cache.layers, seq.cache.layers, strict=True):
        assert torch.allclose(a.keys, b.keys, atol=1e-5) and torch.allclose(
            a.values, b.values, atol=1e-5
        )


def test_cancel_takes_effect_within_one_step(tiny_llama):
    gen = Generator(tiny_llama, SamplingSettings(penalty=1.0))
    stop = threading.Event()
    steps_after_cancel = 0
    event = None
    for i, event in enumerate(gen.generate([4, 5, 6], 10_000, should_stop=stop.is_set)):  # noqa: B007
        if stop.is_set():
            steps_after_cancel += 1
        if i == 5:
            stop.set()
    assert event.done and event.stop_reason == "cancelled"
    assert steps_after_cancel == 1  # only the cancellation event itself
    assert gen.stats.tokens < 10_000


def test_stop_string_callback(tiny_llama):
    gen = Generator(tiny_llama, SamplingSettings(penalty=1.0))
    seen = []
    events = list(
        gen.generate(
            [4, 5, 6], 500, stop_on_text=lambda ids: seen.append(len(ids)) or len(ids) >= 20
        )
    )
    assert events[-1].stop_reason == "stop_string"
    assert 20 <= gen.stats.tokens < 500


def test_bad_requests_get_clear_errors(tiny_llama):
    gen = Generator(tiny_llama)
    with pytest.raises(UserError, match="empty"):
        next(gen.generate([], 10))
    with pytest.raises(UserError, match="at least 1"):
        next(gen.generate([1], 0))
    with pytest.raises(UserError, match="context"):
        next(gen.generate([2] * 1024, 10))  # the tiny model holds 1,024 positions
    with pytest.raises(UserError, match="vocabulary"):
        next(gen.generate([1, 99999], 10))


def test_generation_stops_at_a_full_context(tiny_llama):
    gen = Generator(tiny_llama, SamplingSettings(penalty=1.0))
    events = list(gen.generate([2] * 1000, 100))
    assert events[-1].stop_reason == "context_full"
    assert gen.stats.tokens == 1024 - 1000


@pytest.mark.slow
def test_accelerate_offload_is_exact(tiny_llama, tmp_path):
    """A model dispatched over CPU and disk by accelerate generates the same tokens."""
    from accelerate import dispatch_model, infer_auto_device_map  # noqa: F401
    from transformers import AutoModelForCausalLM

    from tests.engine.decoding.test_exactness import hf_greedy

    folder = tmp_path / "tiny"
    tiny_llama.save_pretrained(folder)
    offloaded = AutoModelForCausalLM.from_pretrained(
        folder,
        device_map={
            "model.embed_tokens": "cpu",
            "model.layers.0": "cpu",
            "model.layers.1": "disk",
            "model.norm": "cpu",
            "model.rotary_emb": "cpu",
            "lm_head": "disk",
        },
        offload_folder=str(tmp_path / "offload"),
        dtype=torch.float32,
    )
    assert any(getattr(m, "_hf_hook", None) is not None for m in offloaded.modules())
    sampling = SamplingSettings(penalty=1.1, window=32)
    prompt = [7, 8, 9, 7, 8, 9, 7, 8]
    expected = hf_greedy(tiny_llama, prompt, 80, sampling)
    gen = Generator(offloaded, sampling, DraftSettings(max_nodes=16, adaptive=False))
    got = [t for ev in gen.generate(prompt, 80) for t in ev.tokens]
    assert got == expected
    assert gen.stats.accepted_drafts > 0

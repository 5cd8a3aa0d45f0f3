"""Several generations written together (together.py): one model pass per step for all of
them, and each generation exactly the text it writes alone for its seed."""

from __future__ import annotations

import random

import pytest
import torch
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.history_source import HistorySource
from swiftwriter.engine.decoding.trie import best_size
from swiftwriter.engine.passes.backends import LeanBackend
from swiftwriter.engine.passes.verify import ModelRunner

from tests.engine.families import build_family

SAMPLED = SamplingSettings(greedy=False, temperature=0.7, min_p=0.05, penalty=1.1, window=64)
SEEDS = [3, 4, 5]


def alone(model, prompt, n, sampling, seed):
    gen = Generator(model, sampling, DraftSettings.plain(), eos_ids=[1], calibrate=False)
    return [t for event in gen.generate(prompt, n, seed=seed) for t in event.tokens]


def together(model, prompt, n, sampling, seeds, sources=(), **kwargs):
    drafting = DraftSettings(sources=("ngram", "suffix"), max_nodes=12, adaptive=False)
    gen = Generator(model, sampling, drafting, sources=list(sources), eos_ids=[1], calibrate=False)
    out: dict[int, list[int]] = {i: [] for i in range(len(seeds))}
    done: dict[int, str] = {}
    for side in gen.generate_together(prompt, n, seeds, **kwargs):
        assert side.index not in done, "a run went on after it said it was done"
        out[side.index].extend(side.event.tokens)
        if side.event.done:
            done[side.index] = side.event.stop_reason
    assert sorted(done) == list(range(len(seeds))), "every run ends with a done event"
    return [out[i] for i in range(len(seeds))], gen.together_stats, done


def model_for(name: str):
    if name == "llama-bf16":
        return build_family("llama", seed=0).to(torch.bfloat16)
    return build_family(name, seed=0)


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("name", ["llama", "llama-bf16", "gemma2", "qwen3-window", "phi3"])
def test_runs_together_write_what_each_writes_alone(name, monkeypatch):
    """Each run's text is plain decoding's for its seed, drafts are accepted, and every step
    verifies all runs' tries in one pass (the native kernel's attention, PyTorch's for Gemma
    2's soft-capping, sliding windows cut per row)."""
    model = model_for(name)
    rng = random.Random(name)
    prompt = [rng.randrange(2, 250) for _ in range(30)]
    expected = [alone(model, prompt, 60, SAMPLED, seed) for seed in SEEDS]
    # a history that knows each run's text: its drafts are right for a while, then wrong
    history = HistorySource(sequences=[prompt + text[:40] for text in expected])
    passes = {"together": 0}
    real = LeanBackend.pass_together

    def counted(self, *args):
        passes["together"] += 1
        return real(self, *args)

    monkeypatch.setattr(LeanBackend, "pass_together", counted)
    got, stats, _ = together(model, prompt, 60, SAMPLED, SEEDS, sources=[history])
    for i, seed in enumerate(SEEDS):
        assert got[i] == expected[i], f"seed {seed}: the run together wrote another text"
    assert sum(s.accepted_drafts for s in stats.values()) > 0, "no draft was ever accepted"
    # one pass per step while two runs or more are going
    steps = sorted(s.forward_passes for s in stats.values())
    assert passes["together"] == steps[-2], (passes, steps)


@pytest.mark.usefixtures("one_thread")
def test_greedy_runs_together_all_write_the_greedy_text(tiny_llama):
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 5, 6]
    greedy = SamplingSettings(greedy=True, penalty=1.2, window=32)
    expected = alone(tiny_llama, prompt, 50, greedy, None)
    got, _, _ = together(tiny_llama, prompt, 50, greedy, [None, None])
    assert got == [expected, expected]


@pytest.mark.usefixtures("one_thread")
def test_runs_on_stored_blocks_write_what_each_writes_alone(tmp_path_factory):
    from tests.engine.passes.test_quant import stored_model

    model = stored_model("Q4_0", tmp_path_factory)
    prompt = [random.Random(9).randrange(2, 250) for _ in range(24)]
    expected = [alone(model, prompt, 40, SAMPLED, seed) for seed in SEEDS]
    history = HistorySource(sequences=[prompt + text[:30] for text in expected])
    got, stats, _ = together(model, prompt, 40, SAMPLED, SEEDS, sources=[history])
    assert got == expected
    assert sum(s.accepted_drafts for s in stats.values()) > 0


@pytest.mark.usefixtures("one_thread")
def test_a_stop_cancels_every_run(tiny_llama):
    calls = {"n": 0}

    def stop() -> bool:
        calls["n"] += 1
        return calls["n"] > 3

    got, _, done = together(tiny_llama, [5, 6, 7], 100, SAMPLED, SEEDS, should_stop=stop)
    assert set(done.values()) == {"cancelled"}
    assert all(0 < len(text) < 100 for text in got)


def test_one_head_call_computes_every_runs_root(tiny_llama, monkeypatch):
    """The roots' logits for all runs in one lm_head call, each the bits its own call gives."""
    runners = [ModelRunner(tiny_llama) for _ in range(3)]
    for i, runner in enumerate(runners):
        runner.prefill([5, 6, 7, 8 + i])
    tries = [_root_trie(9 + i) for i in range(3)]
    ModelRunner.forward_together(runners, tries)
    calls = {"n": 0}
    real = ModelRunner._head

    def counted(self, hidden):
        calls["n"] += 1
        return real(self, hidden)

    monkeypatch.setattr(ModelRunner, "_head", counted)
    ModelRunner.roots_together(runners, tries)
    rows = [runner.logits_at(0, trie) for runner, trie in zip(runners, tries, strict=True)]
    assert calls["n"] == 1
    for runner, trie, row in zip(runners, tries, rows, strict=True):
        runner._row_logits = {}
        assert torch.equal(runner.logits_at(0, trie), row)
    assert calls["n"] == 4


def _root_trie(token: int):
    from swiftwriter.engine.passes import Trie

    return Trie([token], [-1], [0], [()], [0], [1.0], [{}])


def test_a_forked_history_shares_its_index_not_its_context():
    source = HistorySource(sequences=[[1, 2, 3, 4, 5, 6]])
    source.observe([9, 9, 9])
    fork = source.fork()
    assert fork.index is source.index
    assert fork._context == [] and source._context == [9, 9, 9]


def test_drafts_are_priced_at_the_shared_passs_margin():
    """Alone, a pass of up to 4 rows costs one row's: three drafts pay. Beside other runs'
    rows that already fill those 4 rows, each draft costs in full, and unlikely ones no longer
    pay."""
    cost = lambda n: max(1.0, n / 4)  # noqa: E731
    probs = [0.5, 0.3, 0.2]
    assert best_size(probs, cost, 8) == 3
    assert best_size(probs, cost, 8, rows=4, tokens=4.0) < 3


@pytest.mark.usefixtures("one_thread")
def test_runs_that_slide_their_windows_still_write_what_each_writes_alone(tiny_llama):
    """A small window: every run slides (its cache shifted, the shared prompt no longer shared
    from then on) and still writes its own text."""
    from swiftwriter.engine.decoding.settings import ContextSettings

    context = ContextSettings(policy="slide", sink=4, keep=0.5, limit=48)
    prompt = [random.Random(5).randrange(2, 250) for _ in range(40)]

    def alone_in(seed):
        gen = Generator(tiny_llama, SAMPLED, DraftSettings.plain(), eos_ids=[1],
                        calibrate=False, context=context)  # fmt: skip
        return [t for event in gen.generate(prompt, 60, seed=seed) for t in event.tokens]

    gen = Generator(tiny_llama, SAMPLED, DraftSettings(sources=("ngram", "suffix")),
                    eos_ids=[1], calibrate=False, context=context)  # fmt: skip
    got: dict[int, list[int]] = {0: [], 1: []}
    for side in gen.generate_together(prompt, 60, [3, 4]):
        got[side.index].extend(side.event.tokens)
    assert [got[0], got[1]] == [alone_in(3), alone_in(4)]
    assert all(s.slides > 0 for s in gen.together_stats.values())

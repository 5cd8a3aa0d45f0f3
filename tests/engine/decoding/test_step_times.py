"""Host and model time per step: the model's passes (forward and the walk's lm_head calls) are
timed apart from everything else a step does (drafting, the trie, the choices, bookkeeping).
Sleeps mark where time is spent, so the split is checked without timing anything real."""

from __future__ import annotations

import time

from swiftwriter.bench.methods import format_table
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.sources import Candidate, CandidateSource
from swiftwriter.engine.passes.verify import ModelRunner

NAP = 0.02


class SlowSource(CandidateSource):
    """Proposes one wrong token after a nap: host time."""

    name = "slow"

    def observe(self, tokens):
        pass

    def propose(self, context, max_candidates):
        time.sleep(NAP)
        return [Candidate(self.name, (3,))]


def test_head_calls_count_as_model_time_and_drafting_as_host_time(tiny_llama, monkeypatch):
    logits_at = ModelRunner.logits_at

    def slow_head(self, node, trie=None):
        time.sleep(NAP)
        return logits_at(self, node, trie)

    monkeypatch.setattr(ModelRunner, "logits_at", slow_head)
    drafting = DraftSettings(sources=(), max_nodes=4, adaptive=False)
    gen = Generator(
        tiny_llama, SamplingSettings(greedy=True), drafting, [SlowSource()], batched_accept=False
    )
    for _ in gen.generate([5, 6, 7, 8], 6):
        pass
    stats = gen.stats
    steps = stats.forward_passes
    assert steps >= 3
    # every step walks at least one node (a head call) and asks the source once
    assert stats.model_s >= steps * NAP
    assert stats.decode_s - stats.model_s >= steps * NAP
    row = stats.as_dict()
    assert row["model_ms_per_step"] >= 1000 * NAP
    assert row["host_ms_per_step"] >= 1000 * NAP
    total = (row["model_ms_per_step"] + row["host_ms_per_step"]) * steps / 1000
    assert abs(total - stats.decode_s) < 1e-3
    table = format_table({"tokenswift": {**_row(), "stats": row}, "hf": _row()})
    assert f"{row['host_ms_per_step']:.1f} + {row['model_ms_per_step']:.1f}" in table


def _row() -> dict:
    return {"tokens": 6, "seconds": 1.0, "tokens_per_s": 6.0, "tau": 1.0, "accepted_by_source": {}}

"""One statistics type (issue 61): the engine's RunStats is what a take's live snapshots carry
(a copy per snapshot, which the engine's later steps leave alone) and what the session's result
holds; the take's LiveStats adds only its own fields and repeats none of RunStats'."""

from __future__ import annotations

import dataclasses

from swiftwriter.engine import SamplingSettings
from swiftwriter.engine.decoding.stats import RunStats, StepStats
from swiftwriter.writing.take import LiveStats, Take, TakeRequest

from tests.writing.test_take_log import loaded_model


def run_names() -> set[str]:
    """RunStats' fields and properties: what the engine already names."""
    props = {name for name, value in vars(RunStats).items() if isinstance(value, property)}
    return {f.name for f in dataclasses.fields(RunStats)} | props


def repeated(live_type: type) -> set[str]:
    return {f.name for f in dataclasses.fields(live_type)} & run_names()


def test_live_stats_repeats_no_field_of_the_engines():
    assert repeated(LiveStats) == set()
    assert {"tokens", "tau", "tokens_per_s", "decode_s", "plain_steps"} <= run_names()

    @dataclasses.dataclass
    class Repeating(LiveStats):  # what the check is for: a counter named twice again
        tau: float = 0.0

    assert repeated(Repeating) == {"tau"}


def test_a_snapshot_is_a_copy_the_engine_leaves_alone():
    run = RunStats(dtype="float32")
    step = StepStats(3, 4, 2, {"ngram": 2}, [1, 1], 0.01, 0.02, 0.0)
    run.add(step)
    run.accepted_by_source_depth["ngram:1"] += 1
    run.source_sizes["ngram"] = {"entries": 5, "cap": 9}
    run.add_surprise([1.0, 2.0])
    seen = run.snapshot()
    assert seen == run and seen is not run
    run.add(step)  # the engine goes on in its thread
    run.accepted_by_source_depth["ngram:1"] += 1
    run.source_sizes["ngram"]["entries"] = 6
    run.add_surprise([3.0])
    assert (seen.tokens, seen.forward_passes, seen.accepted_by_source["ngram"]) == (3, 1, 2)
    assert seen.accepted_by_depth == {1: 1, 2: 1} and seen.accepted_by_source_depth == {
        "ngram:1": 1
    }
    assert seen.source_sizes == {"ngram": {"entries": 5, "cap": 9}} and seen._nats == [3.0, 2]
    assert run.tokens == 6 and run.accepted_by_source["ngram"] == 4


def test_a_takes_snapshots_carry_copies_of_the_engines_run(tiny_llama, monkeypatch):
    monkeypatch.setattr("swiftwriter.writing.take.STATS_INTERVAL_S", 0.0)  # a snapshot a step
    engine_runs: list[RunStats] = []
    original = Take._on_step

    def spy(self, event):
        engine_runs.append(event.run)
        original(self, event)

    monkeypatch.setattr(Take, "_on_step", spy)
    snapshots: list[LiveStats] = []
    request = TakeRequest(None, None, loaded_model(tiny_llama), prompt_text="Once upon a time",
                          target=12, sampling=SamplingSettings(greedy=True), history=None,
                          measure_baseline=False)  # fmt: skip
    outcome = Take(request, on_stats=snapshots.append).run()
    live = [s for s in snapshots if s.phase == "generating"]
    assert len(live) >= 3 and all(type(s.run) is RunStats for s in live)
    engine = engine_runs[0]
    assert all(r is engine for r in engine_runs)  # one object, which the engine mutates
    assert all(s.run is not engine for s in live)
    counts = [s.run.tokens for s in live]
    assert counts == sorted(counts) and counts[0] < counts[-1]  # each froze at its step
    assert [s.tokens for s in live] == counts
    done = snapshots[-1]
    assert done.phase == "done" and done.run is outcome.result.run  # the session's RunStats
    assert done.run.tokens == outcome.stats["tokens"] == len(outcome.result.token_ids)
    assert done.run.as_dict()["tau"] == outcome.stats["tau"]

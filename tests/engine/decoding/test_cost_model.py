"""The verification cost model that sizes each step's trie: it must follow a drifting machine
without freezing on a measurement taken in a noisy minute."""

from __future__ import annotations

import random

from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.estimate import CostModel, SourceGate
from swiftwriter.engine.decoding.trie import best_size

from tests.engine.wrong_source import WrongAndSlow


def calibrated(shape=None) -> CostModel:
    costs = CostModel()
    for n, ratio in (shape or {1: 1.0, 2: 1.05, 4: 1.1, 8: 1.2, 16: 1.4, 32: 1.8}).items():
        costs.observe(n, 0.05 * ratio, weight=1.0)
    return costs


def test_calibration_gives_the_shape():
    costs = calibrated()
    assert costs.ready()
    assert abs(costs(4) - 1.1) < 1e-9 and abs(costs(3) - 1.075) < 1e-9
    assert costs(1) == 1.0 and costs(64) >= costs(32) >= costs(16)


def test_a_noisy_minute_does_not_freeze_drafting():
    """Big passes measured while the machine was busy, then only one-token passes while it is
    quiet: the big bucket's cost must not stay at its busy-minute value (with per-bucket times
    it did, drafting priced itself out and was never measured again)."""
    costs = calibrated()
    for _ in range(40):
        costs.observe(4, 0.05 * 1.1 * 1.8)  # everything 80% slower for a while
    for _ in range(60):
        costs.observe(1, 0.05)  # quiet again; no drafts, so bucket 4 is not seen
    assert costs(4) < 1.25
    # and a trie whose first node is accepted half the time is drafted again
    assert best_size([0.5, 0.3, 0.2], costs, 16) >= 1


def test_follows_a_growing_context_and_learns_the_true_shape():
    """Passes slow down as the context grows; sizes come in any order; noise of +-15%."""
    rng = random.Random(0)
    costs = calibrated({1: 1.0, 2: 1.0, 4: 1.0, 8: 1.0})  # a wrong first guess
    truth = {1: 1.0, 2: 1.1, 4: 1.3, 8: 1.6}
    for step in range(3000):
        n = rng.choice([1, 2, 4, 8])
        base = 0.05 * (1 + step / 1000)  # three times slower by the end
        costs.observe(n, base * truth[n] * rng.uniform(0.85, 1.15))
    for n, ratio in truth.items():
        assert abs(costs(n) - ratio) < 0.1 * ratio, (n, costs(n))
    assert abs(costs.seconds[1] - 0.05 * 4) < 0.05 * 4 * 0.2  # the base followed the drift


def test_the_size_a_run_mostly_drafts_learns_its_true_cost():
    """A run drafting 8-row trees almost every step, with the pace keeper's short plain trials
    in between: a calibration that put 8 rows at 0.95x of one row (a noisy minute at the
    prompt) is corrected to the true 1.25x. Learned against the base that those passes feed,
    the ratio stayed at its calibrated value."""
    rng = random.Random(1)
    costs = calibrated({1: 1.0, 2: 1.0, 4: 0.95, 8: 0.95, 16: 1.2})
    step = 0
    for _ in range(12):  # stretches of 28 drafting passes, then 4 plain ones
        for n in [8] * 28 + [1] * 4:
            base = 0.03 * (1 + step / 2000)  # the context grows
            costs.observe(n, base * (1.25 if n == 8 else 1.0) * rng.uniform(0.9, 1.1))
            step += 1
    assert abs(costs(8) - 1.25) < 0.06, costs(8)
    assert abs(costs.seconds[1] - 0.03 * (1 + step / 2000)) < 0.003  # the base followed


def test_passes_far_from_any_one_token_pass_teach_no_ratio():
    """A long stretch of big passes between two one-token passes (a busy minute, or drafting
    far ahead) leaves the ratios alone: nothing close measured the one-token pass then."""
    costs = calibrated()
    costs.observe(1, 0.05)
    for _ in range(costs.bracket + 1):
        costs.observe(8, 0.05 * 1.2 * 2.0)  # twice as slow as calibrated
    costs.observe(1, 0.05)
    assert abs(costs(8) - 1.2) < 1e-9
    for _ in range(4):  # a short stretch between one-token passes does teach
        costs.observe(8, 0.05 * 1.5)
    costs.observe(1, 0.05)
    assert 1.2 < costs(8) < 1.5


def test_a_costly_source_that_saves_nothing_is_asked_only_to_probe():
    gate = SourceGate(probe=4, warmup=8)
    asked = []
    for _ in range(80):
        wanted = gate.wanted()
        asked.append(wanted)
        if wanted:
            gate.observe(0.004, -0.001)  # 4 ms per call, its drafts cost more than they saved
    assert all(asked[:8])
    assert sum(asked[8:]) == len(asked[8:]) // 4  # every 4th step after the warm-up
    assert gate.skipped == len(asked) - sum(asked)
    for _ in range(200):  # the text changes: its drafts now save a pass a step
        if gate.wanted():
            gate.observe(0.004, 0.05)
    assert all(gate.wanted() for _ in range(20))


def test_the_generator_stops_asking_a_costly_source_whose_drafts_fail(tiny_llama):
    """A gated source that always guesses wrong: asked on the warm-up steps and then on every
    probe step only; the output is unchanged (greedy equals plain decoding)."""

    sampling = SamplingSettings(greedy=True, penalty=1.2, window=64)
    prompt = list(range(10, 40))
    plain = Generator(tiny_llama, sampling, DraftSettings.plain(), calibrate=False)
    want = [t for ev in plain.generate(prompt, 80) for t in ev.tokens]
    source = WrongAndSlow(gated=True)
    drafting = DraftSettings(sources=(), max_nodes=1, adaptive=False)
    gen = Generator(tiny_llama, sampling, drafting, sources=[source], calibrate=False)
    got = [t for ev in gen.generate(prompt, 80) for t in ev.tokens]
    assert got == want
    assert gen.stats.gated_skips > 40
    assert source.calls + gen.stats.gated_skips == gen.stats.forward_passes


def test_a_run_that_always_drafts_still_corrects_its_calibration():
    """A calibration that put 8 rows at 1.6x of one row (a noisy moment at the prompt), then a
    run that drafts 8-row trees every step: no step was ever plain, so no bracket closed and
    the ratio stayed at 1.6x for the whole process (one suite run drafted half as many nodes a
    pass as the run before on the same texts). The model now asks for a plain step every
    `recheck` passes and again half a bracket later, and the passes between learn."""
    costs = calibrated({1: 1.0, 2: 1.05, 4: 1.1, 8: 1.6})
    plain = 0
    for _ in range(3000):
        if costs.wants_one():
            costs.observe(1, 0.05)
            plain += 1
        else:
            costs.observe(8, 0.05 * 1.1)
    assert abs(costs(8) - 1.1) < 0.05, costs(8)
    assert plain <= 2 * 3000 / (costs.recheck + costs.bracket // 2) + 2  # two in ~110 steps

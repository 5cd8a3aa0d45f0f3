"""The compute threads chosen by measurement while a run goes (engine/decoding/threads.py): the
faster count is kept, checked again when a pass jumps, and switching counts never changes the
text."""

from __future__ import annotations

import pytest
import torch
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings, passes
from swiftwriter.engine.decoding import threads

from tests.conftest import build_tiny


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def feed(tuner: threads.ThreadTuner, cost: dict[int, float], passes: int) -> list[int]:
    """Run `passes` passes whose seconds per unit depend on the thread count; the counts used."""
    used = []
    for _ in range(passes):
        tuner.before()
        used.append(torch.get_num_threads())
        tuner.observe(cost[torch.get_num_threads()])
    return used


@pytest.mark.usefixtures("two_threads")
def test_the_faster_count_is_kept_and_checked_again_when_a_pass_jumps():
    tuner = threads.ThreadTuner(most=2, every=12, trial=3)
    quiet = {2: 0.007, 1: 0.012}
    used = feed(tuner, quiet, 15)
    assert used[:12] == [2] * 12 and used[12:15] == [1, 1, 1]  # the periodic trial
    used = feed(tuner, quiet, 3)
    assert used == [2, 2, 2]  # ... which measures the count in use again last
    assert tuner.current == 2 and tuner.why == "2 threads of 2: the others measured 1.7x slower"
    busy = {2: 0.030, 1: 0.012}  # another process keeps a core: two threads wait on each other
    used = feed(tuner, busy, 8)
    assert used == [2, 1, 1, 1, 2, 2, 2, 1]  # the jump started a trial at once; one thread stays
    assert tuner.current == 1 and tuner.why == "1 thread of 2: the others measured 2.5x slower"
    used = feed(tuner, quiet, 20)  # the other process ended: the next periodic trial sees it
    assert used[-1] == 2 and tuner.current == 2


def run(model, sampling, tuner):
    threads._tuner = tuner
    drafting = DraftSettings(sources=("ngram", "suffix"), max_nodes=6, adaptive=False)
    gen = Generator(model, sampling, drafting, calibrate=False, tune_threads=tuner is not None)
    prompt = [5, 9, 13, 5, 9, 13, 21, 5, 9]
    return [t for event in gen.generate(prompt, 40) for t in event.tokens]


@pytest.mark.usefixtures("two_threads")
@pytest.mark.parametrize("kind", ["Q4_1", "Q4_K"])
def test_switching_threads_mid_run_never_changes_the_text(kind, monkeypatch, tmp_path_factory):
    from tests.engine.passes.test_quant import stored_model

    model = stored_model(kind, tmp_path_factory)
    assert passes.thread_invariant(model) and not passes.thread_invariant(build_tiny())
    restless = threads.ThreadTuner(most=2, every=2, trial=1)  # switches every few passes
    seen = []
    monkeypatch.setattr(
        restless, "before", lambda f=restless.before: (f(), seen.append(torch.get_num_threads()))
    )
    for sampling in (SamplingSettings(greedy=True, penalty=1.1, window=32),
                     SamplingSettings(greedy=False, penalty=1.1, window=32, min_p=0.05, seed=4)):  # fmt: skip
        steady = run(model, sampling, None)
        assert run(model, sampling, restless) == steady, sampling.greedy
    assert {1, 2} <= set(seen)  # both counts ran passes
    threads._tuner = None

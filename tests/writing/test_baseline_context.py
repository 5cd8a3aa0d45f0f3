"""The speedup's plain baseline is timed where the take's steps run (its middle context) and
taken as the mean step, as a run's time is the sum of its steps."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from swiftwriter.engine.decoding.settings import SamplingSettings
from swiftwriter.writing import baseline, take


def test_the_prompt_is_lengthened_with_its_own_tokens_within_the_models_context():
    assert baseline.at_context([5, 6, 7], 8, None) == [5, 6, 7, 5, 6, 7, 5, 6]
    assert baseline.at_context([5, 6, 7], 2, None) == [5, 6, 7]  # long enough already
    assert baseline.at_context([5, 6, 7], None, None) == [5, 6, 7]
    room = 100 - 2 * baseline.STEPS  # the timed steps must fit after it
    assert len(baseline.at_context([5, 6, 7], 500, 100)) == room


def test_the_plain_rate_is_the_mean_step_after_the_first(monkeypatch):
    """Synthetic step times: one slow step among quick ones counts, as it does in a run."""
    times = [0.5, 0.02, 0.02, 0.02, 0.14]  # the first pays one-off costs

    class Timed:
        def __init__(self, model, *args, **kwargs):
            pass

        def generate(self, prompt, steps, should_stop=None):
            assert len(prompt) == 40  # timed at the context asked for
            for seconds in times:
                step = SimpleNamespace(new_tokens=1, draft_s=0.0, verify_s=seconds, overhead_s=0.0)
                yield SimpleNamespace(stop_reason="", step=step)

    monkeypatch.setattr(baseline, "Generator", Timed)
    model = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=4096))
    got = baseline.measure_plain(model, [3] * 10, SamplingSettings(), context=40, cache=False)
    assert got.context == 40 and got.steps == 4
    assert got.tokens_per_s == pytest.approx(1 / 0.05)  # the median would say 1 / 0.02


def test_a_real_model_is_timed_at_the_longer_context(tiny_llama):
    baseline.clear_cache()
    sampling = SamplingSettings()
    got = baseline.measure_plain(tiny_llama, list(range(2, 40)), sampling, steps=4, context=300)
    assert got.context == 300 and got.tokens_per_s > 0
    # another context bucket than the prompt's own: not the same measurement
    short = baseline.measure_plain(tiny_llama, list(range(2, 40)), sampling, steps=4)
    assert short is not got and short.context == 38
    baseline.clear_cache()


def test_a_take_asks_for_its_middle_context(monkeypatch):
    asked = {}

    def measure(model, prompt, sampling, should_stop=None, context=None):
        asked.update(prompt=len(prompt), context=context)
        return None

    monkeypatch.setattr(take, "measure_plain", measure)
    job = take.Take.__new__(take.Take)
    job.session = SimpleNamespace(baseline_inputs=lambda: (None, list(range(500))))
    job.plan = SimpleNamespace(sampling=SamplingSettings())
    job.target, job.on_stats = 1300, lambda stats: None
    job._measure(lambda: False)
    assert asked == {"prompt": 500, "context": 500 + 650}

"""The plain-decoding baseline behind the speedup a take reports (the app's Speed dock shows it).

A speedup is only honest against plain decoding measured with the same model, on this machine,
at this context length: attention cost grows with the context, so a number measured at 100
tokens says little at 5,000. Before a generation the worker times a few plain decoding steps
(DraftSettings.plain(), one token per forward pass) at the take's middle context (the prompt
and half the take: the prompt's own tokens stand in for the text not yet written), and keeps
the result per model and context bucket for a couple of minutes, so that back-to-back
generations do not pay for it again while the machine's load is still about the same. Timed at
the prompt alone, a 1,000-word take after a 500-token prompt compared its steps at 500 to 1,800
tokens with plain steps at 500, and the plain rate is the steps' mean, as a run's time is their
sum (the median left out the slow steps that a run pays too). The speedup is wall-clock, as
`swiftwriter bench` reports it: the same prefill for both, then plain decoding at the measured
rate against this run's own decoding time.

A take whose passes were mostly undrafted (sampling, where drafts rarely hold, or a text where
they did not pay) carries a better measurement of its own: those passes are plain decoding's,
timed in the same minutes and contexts. Twelve steps timed before the run, a minute apart from
it, differed from a plain run of the same length by -9% to +15% on a 2-core EPYC; the same
take's undrafted passes by -1% to +2.5% (`plain_rate` prefers them then)."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from swiftwriter.engine.decoding.generator import Generator, context_length
from swiftwriter.engine.decoding.settings import DraftSettings, SamplingSettings

BUCKET = 256  # tokens of context that share one measurement
STEPS = 16  # plain steps timed per measurement (the first one is a warm-up)
MAX_AGE_S = 120.0  # the machine's load changes: an older measurement is taken again
# A run's own undrafted passes stand for plain decoding when they are at least this many and
# at least this share of its passes (where drafts pay they are few, after tree passes).
IN_RUN_PASSES = 24
IN_RUN_SHARE = 0.5

_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {key: Baseline}
_lock = threading.Lock()


@dataclass(frozen=True)
class Baseline:
    tokens_per_s: float  # plain decoding, decode steps only (prefill excluded)
    context: int  # prompt tokens it was measured at
    steps: int
    measured_at: float  # time.time()

    def as_dict(self) -> dict:
        return {
            "plain_tokens_per_s": round(self.tokens_per_s, 3),
            "plain_context": self.context,
            "plain_steps": self.steps,
            "plain_measured": True,
        }


def at_context(prompt: Sequence[int], context: int | None, limit: int | None) -> list[int]:
    """`prompt` lengthened to `context` tokens with its own tokens over again (the cost of a
    step depends on how long the context is, not on what it says), within the model's
    `limit` less room for the timed steps; the prompt itself where it is long enough."""
    ids = list(prompt)
    if limit is not None:
        context = min(context or 0, limit - 2 * STEPS)
    if not ids or context is None or context <= len(ids):
        return ids
    return (ids * (context // len(ids) + 1))[:context]


def measure_plain(
    model,
    prompt: Sequence[int],
    sampling: SamplingSettings,
    steps: int = STEPS,
    should_stop: Callable[[], bool] | None = None,
    cache: bool = True,
    context: int | None = None,
) -> Baseline | None:
    """Time `steps` plain decoding steps after `prompt`, lengthened to `context` tokens when
    that is longer (`at_context`: a take's middle); the mean step gives tokens/s. Returns None
    when cancelled before it could measure anything."""
    prompt = at_context(prompt, context, context_length(model.config))
    key = (len(prompt) // BUCKET, sampling.greedy, sampling.penalty != 1.0)
    if cache:
        with _lock:
            hit = _cache.get(model, {}).get(key)
        if hit is not None and time.time() - hit.measured_at < MAX_AGE_S:
            return hit
    generator = Generator(model, sampling, DraftSettings.plain(), calibrate=False)
    times: list[float] = []
    for event in generator.generate(list(prompt), steps, should_stop=should_stop):
        if event.stop_reason == "cancelled":
            break
        step = event.step
        if step.new_tokens:
            times.append((step.draft_s + step.verify_s + step.overhead_s) / step.new_tokens)
    timed = times[1:] if len(times) > 2 else times  # the first step pays one-off costs
    if not timed:
        return None
    mean = sum(timed) / len(timed)
    result = Baseline(1.0 / mean if mean > 0 else 0.0, len(prompt), len(timed), time.time())
    if cache:
        with _lock:
            _cache.setdefault(model, {})[key] = result
    return result


def speedup_over_plain(
    tokens: int, prefill_s: float, decode_s: float, plain_tokens_per_s: float | None
) -> float | None:
    """Wall-clock speedup as `swiftwriter bench` reports it (plain seconds / these seconds):
    both runs pay the same prefill; plain decoding would then take tokens / plain rate (the
    measurement), this run took its own decode time."""
    seconds = prefill_s + decode_s
    if not tokens or not plain_tokens_per_s or seconds <= 0:
        return None
    return (prefill_s + tokens / plain_tokens_per_s) / seconds


def plain_rate(stats: dict) -> tuple[float | None, bool]:
    """Plain decoding's tokens/s for a run's stats (live or stored): its own undrafted
    passes' rate where they are enough (see the module's note), else the measurement taken
    before it (`plain_tokens_per_s`, None without one). Returns (rate, measured in the run)."""
    passes, seconds = stats.get("undrafted_passes", 0), stats.get("undrafted_s", 0.0)
    enough = passes >= max(IN_RUN_PASSES, IN_RUN_SHARE * stats.get("forward_passes", 0))
    if enough and seconds > 0:
        return stats.get("undrafted_tokens", 0) / seconds, True
    return stats.get("plain_tokens_per_s"), False


def stats_speedup(stats: dict) -> float | None:
    """The speedup of a generation from its stats (live or stored: history, summaries)."""
    decode_s = sum(stats.get(k, 0.0) for k in ("draft_s", "verify_s", "overhead_s"))
    return speedup_over_plain(
        stats.get("tokens", 0), stats.get("prefill_s", 0.0), decode_s, plain_rate(stats)[0]
    )


def clear_cache() -> None:
    with _lock:
        _cache.clear()

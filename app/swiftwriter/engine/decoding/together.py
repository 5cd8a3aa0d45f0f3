"""Several generations written side by side in one loop (a rewrite's alternatives, several
takes at once): each step every run drafts its own trie, one model pass verifies all of them
(their rows side by side, each row attending to its own run's cache:
passes.ModelRunner.forward_together), and each run accepts and commits on its own.

A run writes exactly the text it writes alone (the pass computes each row as the run's own
one-token pass does), so with the same-text sampler each run's text is plain decoding's for its
seed. The price of a step is one pass over every run's rows and one lm_head call for their
roots: on a CPU, where a pass of a few rows is bound by reading the weights, three runs cost
far less than three times one. Trees are sized for the shared pass (`best_size`'s `rows`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

from swiftwriter.engine.decoding.events import SideEvent, StepEvent
from swiftwriter.engine.decoding.run import Request, Run
from swiftwriter.engine.decoding.stats import StepStats
from swiftwriter.engine.passes import ModelRunner

log = logging.getLogger(__name__)


def sources_for(gen, count: int) -> list[list]:
    """Each run's candidate sources: the first run's as `generate` builds them, the others
    forked from them before any run starts (shared history, a drafter's weights read only)."""
    first = gen._sources()
    return [first] + [[src.fork() for src in first] for _ in range(count - 1)]


def _others(runs: int, tries: list) -> tuple[int, float]:
    """(rows, expected tokens) the pass holds besides the next run's: the tries built so
    far, and one root for each run still to build after it."""
    later = runs - 1 - len(tries)
    return sum(len(t) for t in tries) + later, sum(1.0 + sum(t.probs[1:]) for t in tries) + later


def generate_together(
    gen, requests: list[Request], should_stop: Callable[[], bool] | None
) -> Iterator[SideEvent]:
    """The loop for `Generator.generate_together`: yields a SideEvent per run per step until
    every run has stopped (or `should_stop()`: all cancelled)."""
    runs: list[Run] = []
    for request, sources in zip(requests, sources_for(gen, len(requests)), strict=True):
        backend = runs[0].runner.backend if runs else None
        runs.append(gen.run_type(gen, request, sources, backend=backend))
    try:
        for i, run in enumerate(runs):
            same = i > 0 and run.request.prompt == runs[0].request.prompt
            run.start(prefilled=runs[0] if same else None)
            if len(runs) > 1:
                run.threads = None  # one thread count for the shared pass: torch's own
        active = list(runs)
        log.debug("%d runs written together, %d prompt tokens", len(runs), len(requests[0].prompt))
        while active:
            if should_stop is not None and should_stop():
                for run in active:
                    run.finish("cancelled")
                    empty = StepStats(0, 0, 0, {}, [], 0, 0, 0)
                    event = StepEvent([], empty, run.stats, True, "cancelled")
                    yield SideEvent(runs.index(run), event)
                return
            yield from _step(gen, runs, active)
    finally:
        for run in runs:
            run.close()


def _step(gen, runs: list[Run], active: list[Run]) -> Iterator[SideEvent]:
    """One step of every active run: draft, one shared pass, accept and commit each; the
    runs that stopped leave `active`."""
    t_draft = time.perf_counter()
    tries: list = []
    for run in active:
        run.slide_if_full()
        tries.append(run.build_trie(run.propose(), _others(len(active), tries)))
    t_verify = time.perf_counter()
    for run in active:
        run.head_s = 0.0
    runners = [run.runner for run in active]
    ModelRunner.forward_together(runners, tries)
    ModelRunner.roots_together(runners, tries)
    t_model = time.perf_counter()
    gen.costs.observe(sum(len(t) for t in tries), t_model - t_verify)
    done = []
    for run, trie in zip(list(active), tries, strict=True):
        run.stats.kv_tokens_max = max(run.stats.kv_tokens_max, run.runner.length + len(trie))
        path, new = run.accept(trie)
        t_after = time.perf_counter()
        run.commit(trie, path, new, None)
        times = (t_draft, t_verify, t_model, t_after, time.perf_counter())
        step = run.record(trie, path, new, times)
        reason = run.stop_reason(new)
        if reason:
            run.finish(reason)
            done.append(run)
        yield SideEvent(runs.index(run), StepEvent(new, step, run.stats, bool(reason), reason))
    for run in done:
        active.remove(run)

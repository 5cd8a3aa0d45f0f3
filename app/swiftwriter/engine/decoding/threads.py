"""How many compute threads a take runs on, chosen by measurement while it runs.

A writer's machine always runs something else. On two cores with one other busy process, two
compute threads that wait for each other at every operation collapse (a Creative bench did not
finish in 500 s where it took 35 s quiet; the app wrote 2.5 tokens/s), while one thread writes
at two thirds of the quiet rate. Which count is faster changes as other programs start and
stop, so it is measured, not assumed: the run's pass times, each divided by what the cost model
expects of its size (one-token units), are compared between thread counts; every `every`
passes, or when a pass takes `jump` times its count's usual time, every count is tried for a
few passes (the one in use last) and the fastest is kept.

Only where a row's bits cannot depend on the thread count: a model on stored blocks, whose
products and tree attention compute each output on one thread, in one order
(passes.thread_invariant). Float products may split a sum across threads (a float32 cache was
seen to differ in its last bits), so a float model keeps the count it starts with. The tests
hold the text of a run that switches to that of one that does not."""

from __future__ import annotations

import statistics
from collections import deque

import torch


class ThreadTuner:
    """One per process (the thread count is the process's): `before()` sets the count for the
    next pass, `observe(units)` takes that pass's seconds per one-token unit."""

    def __init__(self, most: int | None = None, every: int = 48, trial: int = 3, jump: float = 1.8):
        self.most = max(1, most or torch.get_num_threads())
        self.candidates = sorted({self.most, max(1, self.most - 1), max(1, self.most // 2)})
        self.every, self.trial, self.jump = every, trial, jump
        self.current = self.most
        self.times: dict[int, deque] = {}  # thread count -> its recent seconds per unit
        self._trial: list[int] = []  # thread counts left to try, one pass batch each
        self._left = 0  # passes left in the running trial
        self._since = 0  # passes since the last trial
        self.why = ""

    def counting(self) -> int:
        """The thread count the next pass runs on."""
        return self._trial[0] if self._left > 0 else self.current

    def before(self) -> None:
        want = self.counting()
        if torch.get_num_threads() != want:
            torch.set_num_threads(want)

    def usual(self, count: int) -> float | None:
        got = self.times.get(count)
        return statistics.median(got) if got else None

    def observe(self, seconds_per_unit: float) -> None:
        count = torch.get_num_threads()
        usual = self.usual(count)
        self.times.setdefault(count, deque(maxlen=5)).append(seconds_per_unit)
        if self._left > 0:
            self._left -= 1
            if self._left == 0:
                self._trial.pop(0)
                self._left = self.trial if self._trial else 0
                if not self._trial:
                    self._choose()
            return
        self._since += 1
        jumped = usual is not None and seconds_per_unit > self.jump * usual
        if len(self.candidates) > 1 and (self._since >= self.every or jumped):
            # every count measured as the machine is now, the one in use again last
            self._trial = [c for c in self.candidates if c != self.current] + [self.current]
            self._left = self.trial
            self.times.clear()
            self._since = 0

    def _choose(self) -> None:
        known = {c: self.usual(c) for c in self.candidates if self.usual(c) is not None}
        best = min(known, key=known.get)
        runner_up = sorted(v for c, v in known.items() if c != best)
        self.current = best
        threads = f"{best} thread{'s' if best > 1 else ''}"
        if runner_up:
            self.why = f"{threads} of {self.most}: the others measured {runner_up[0] / known[best]:.1f}x slower"
        else:
            self.why = threads


_tuner: ThreadTuner | None = None


def tuner() -> ThreadTuner:
    """The process's tuner, made on first use from the thread count torch starts with."""
    global _tuner
    if _tuner is None or _tuner.most < 1:
        _tuner = ThreadTuner()
    return _tuner

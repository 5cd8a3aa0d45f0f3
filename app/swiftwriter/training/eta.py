"""How long a training stage will take, said once near its start: a few units are timed and
the rest extrapolated. The first unit is left out of the measurement (it carries the set-up: a
GPU's first kernels, the first allocations), so a large model's estimate is not inflated by it."""

from __future__ import annotations

import time
from collections.abc import Callable


class StageEstimate:
    """Feed it (done, total) as a stage progresses; `update` returns the seconds left once,
    after `measure` units following the first, and None otherwise."""

    def __init__(self, measure: int = 5, clock: Callable[[], float] = time.monotonic):
        self.measure, self.clock = measure, clock
        self.start: tuple[float, int] | None = None  # (time, done) after the first unit
        self.said = False
        self.measured = 0  # units the estimate was measured over

    def update(self, done: int, total: int) -> float | None:
        if self.said:
            return None
        now = self.clock()
        if self.start is None:
            self.start = (now, done)
            return None
        t0, d0 = self.start
        self.measured = done - d0
        # a stage resumed near its end measures what is left but its last unit
        if self.measured < min(self.measure, max(1, total - d0 - 1)) or done >= total:
            return None
        self.said = True
        return (now - t0) / self.measured * (total - done)


def duration(seconds: float) -> str:
    """'about 40 s', 'about 12 min', 'about 3 h 20 min'."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"about {minutes} min"
    hours, rest = divmod(minutes, 60)
    return f"about {hours} h {rest} min" if rest else f"about {hours} h"

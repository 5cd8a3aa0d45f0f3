"""What the generation loops yield: one StepEvent per engine step (generator.py), and, for runs
written together, which run it belongs to (together.py). Apart from both, so neither imports
the other for them."""

from __future__ import annotations

from dataclasses import dataclass

from swiftwriter.engine.decoding.stats import RunStats, StepStats


@dataclass
class StepEvent:
    tokens: list[int]  # newly committed token ids
    step: StepStats
    run: RunStats
    done: bool = False
    stop_reason: str = ""


@dataclass
class SideEvent:
    """One run's step: which run (its place in the requests), and its StepEvent."""

    index: int
    event: StepEvent

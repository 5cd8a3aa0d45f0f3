"""A candidate source that is never right and costs time: what the gate and the pace keeper
must learn to stop paying for."""

from __future__ import annotations

import time

from swiftwriter.engine.decoding.sources import Candidate, CandidateSource


class WrongAndSlow(CandidateSource):
    """Drafts token 2 ((almost) never the tiny models' choice) after `delay` seconds."""

    def __init__(self, name: str = "heads", gated: bool = False, delay: float = 0.002):
        self.name, self.gated, self.delay = name, gated, delay
        self.calls = 0

    def observe(self, tokens):
        pass

    def propose(self, context, max_candidates):
        self.calls += 1
        time.sleep(self.delay)
        return [Candidate(self.name, (2,), 0)]

"""What the engine learns while it runs: how often each source's nodes are accepted, and what a
verification pass of n tokens costs relative to one. Together they size each step's trie."""

from __future__ import annotations

import bisect
from collections import defaultdict


class AcceptanceEstimator:
    """P(node accepted | parent accepted) per (source, depth, rank), with a Beta prior and decay,
    so a source that stops working loses its budget within a few dozen steps."""

    def __init__(
        self,
        prior_accept: float = 0.5,
        prior_reject: float = 9.5,
        decay: float = 0.99,
        max_depth: int = 8,
        max_rank: int = 3,
    ):
        self.a, self.b, self.decay = prior_accept, prior_reject, decay
        self.max_depth, self.max_rank = max_depth, max_rank
        self.stats: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0])

    def _key(self, source: str, depth: int, rank: int) -> tuple:
        return source, min(depth, self.max_depth), min(rank, self.max_rank)

    def __call__(self, source: str, depth: int, rank: int) -> float:
        acc, off = self.stats[self._key(source, depth, rank)]
        return (acc + self.a) / (off + self.a + self.b)

    def record(self, source: str, depth: int, rank: int, accepted: bool) -> None:
        entry = self.stats[self._key(source, depth, rank)]
        entry[0] = entry[0] * self.decay + (1.0 if accepted else 0.0)
        entry[1] = entry[1] * self.decay + 1.0


class CostModel:
    """Relative cost of verifying n tokens, learned from measured pass times.

    A pass time is modelled as base x ratio(size bucket): `base` (the one-token pass now) drifts
    as the context grows and as the machine gets busier or quieter, while the ratios (the shape
    of the cost curve) hardly move. Every pass updates the base, whatever its size, and its own
    bucket's ratio against it. Absolute times per bucket went stale instead: a bucket measured
    in a noisy minute kept its time, the engine stopped drafting because of it, and with no
    drafts the bucket was never measured again (sampled runs fell back to plain decoding)."""

    def __init__(self, sizes=(1, 2, 4, 8, 16, 32, 64), ratio_weight: float = 0.05):
        self.sizes = list(sizes)
        self.ratio_weight = ratio_weight
        self.base: float | None = None
        self.ratios: dict[int, float] = {1: 1.0}

    def _bucket(self, n: int) -> int:
        i = bisect.bisect_left(self.sizes, n)
        return self.sizes[min(i, len(self.sizes) - 1)]

    def observe(self, n: int, seconds: float, weight: float = 0.2) -> None:
        """One pass of n tokens took `seconds`; weight 1.0 sets instead of averaging."""
        b = self._bucket(n)
        ratio = self.ratios.get(b)
        if self.base is None:
            self.base = seconds / (ratio or 1.0)
            if ratio is None:  # nothing to compare a new size with yet
                return
        if b != 1:
            seen = seconds / self.base
            w = 1.0 if ratio is None or weight >= 1.0 else self.ratio_weight
            self.ratios[b] = w * seen + (1 - w) * (ratio or 0.0)
        self.base = (1 - weight) * self.base + weight * seconds / self.ratios[b]

    @property
    def seconds(self) -> dict[int, float]:
        """Estimated time of a pass per bucket now (for statistics and diagnostics)."""
        base = self.base or 0.0
        return {b: base * r for b, r in sorted(self.ratios.items())}

    def ready(self) -> bool:
        return self.base is not None and len(self.ratios) >= 2

    def __call__(self, n: int) -> float:
        """Cost of n tokens in units of a one-token pass (interpolated, never decreasing)."""
        if not self.ready():
            return 1.0 + 0.05 * (n - 1)
        known, floor = [], 1.0
        for size, ratio in sorted(self.ratios.items()):
            floor = max(floor, ratio)  # more tokens never cost less: noise must not say so
            known.append((size, floor))
        below = [(s, r) for s, r in known if s <= n]
        above = [(s, r) for s, r in known if s >= n]
        s0, r0 = below[-1]
        if above:
            s1, r1 = above[0]
        else:  # extrapolate from the last two known sizes
            (s1, r1), (s0, r0) = known[-1], known[-2] if len(known) > 1 else known[-1]
        r = r0 if s1 == s0 else r0 + (r1 - r0) * (n - s0) / (s1 - s0)
        return max(1.0, r)


class ShadowLearner:
    """Learns acceptance from every proposal, drafted or not: once the target has committed the
    tokens that follow, each proposed node is judged as if it had been verified (offered when
    its parent matched, accepted when it matched too). A source that was priced out of the trie
    keeps being measured, so it wins its budget back as soon as it starts being right."""

    def __init__(self, estimator: AcceptanceEstimator, horizon: int = 8, max_pending: int = 32):
        self.estimator = estimator
        self.horizon = horizon
        self.max_pending = max_pending
        self.pending: list[tuple[int, object]] = []

    def add(self, start: int, trie) -> None:
        """`trie` proposed continuations of the first `start` committed tokens."""
        if len(trie) > 1:
            self.pending.append((start, trie))
            if len(self.pending) > self.max_pending:
                self.pending.pop(0)

    def update(self, committed) -> None:
        keep = []
        for start, trie in self.pending:
            if len(committed) - start >= self.horizon:
                self._judge(trie, committed[start : start + self.horizon])
            else:
                keep.append((start, trie))
        self.pending = keep

    def _judge(self, trie, actual) -> None:
        matched = [True] + [False] * (len(trie) - 1)
        for node in range(1, len(trie)):  # parents come before their children
            depth = trie.depths[node]
            if depth > len(actual) or not matched[trie.parents[node]]:
                continue
            ok = trie.tokens[node] == actual[depth - 1]
            matched[node] = ok
            for src in trie.sources[node]:
                self.estimator.record(src, depth, trie.ranks[node], ok)


class SourceGate:
    """Whether a source that costs real time per call (the learned drafter: a few ms, whatever
    the trie then keeps) is worth calling this step. Under the sampler its guesses are often
    priced out of the trie or rejected, and calling it every step then makes a run slower than
    plain decoding. The gate keeps decayed sums of the source's time and of the time its drafts
    saved (drafts accepted from it alone x the one-token pass time, less its share of the
    extra verification cost); while the saving stays below the cost the source is asked only
    every `probe`-th step, so a text where it starts being right wins it back."""

    def __init__(self, probe: int = 4, decay: float = 0.98, warmup: int = 16):
        self.probe, self.decay, self.warmup = probe, decay, warmup
        self.cost = self.saved = 0.0
        self.calls = self.skipped = self._since = 0

    def wanted(self) -> bool:
        if self.calls < self.warmup or self.saved >= self.cost:
            return True
        self._since += 1
        if self._since >= self.probe:
            self._since = 0
            return True
        self.skipped += 1
        return False

    def observe(self, seconds: float, saved_s: float) -> None:
        """One call took `seconds`; its drafts saved `saved_s` (negative when they cost more)."""
        self.calls += 1
        self.cost = self.cost * self.decay + seconds
        self.saved = self.saved * self.decay + saved_s

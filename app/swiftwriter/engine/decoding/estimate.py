"""What the engine learns while it runs: how often each source's nodes are accepted, and what a
verification pass of n tokens costs relative to one. Together they size each step's trie."""

from __future__ import annotations

import bisect
from collections import defaultdict


class AcceptanceEstimator:
    """P(node accepted | parent accepted) per (source, depth, rank), with a Beta prior and decay,
    so a source that stops working loses its budget within a few dozen steps.

    The prior fades as a key's own evidence grows (its weight halves once `evidence` offers
    are counted): a fixed prior of ten pessimistic offers against at most a hundred decayed
    ones held a source that was always right at 0.91 per depth, so a chain's estimate fell to
    a quarter by depth 14 and a text caught in a loop was drafted a third as deep as it held."""

    def __init__(
        self,
        prior_accept: float = 0.5,
        prior_reject: float = 9.5,
        decay: float = 0.99,
        max_depth: int = 8,
        max_rank: int = 3,
        evidence: float = 10.0,
    ):
        self.a, self.b, self.decay = prior_accept, prior_reject, decay
        self.evidence = evidence
        self.max_depth, self.max_rank = max_depth, max_rank
        self.stats: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0])

    def _key(self, source: str, depth: int, rank: int) -> tuple:
        return source, min(depth, self.max_depth), min(rank, self.max_rank)

    def __call__(self, source: str, depth: int, rank: int) -> float:
        acc, off = self.stats[self._key(source, depth, rank)]
        fade = self.evidence / (self.evidence + off)
        return (acc + self.a * fade) / (off + (self.a + self.b) * fade)

    def record(self, source: str, depth: int, rank: int, accepted: bool) -> None:
        entry = self.stats[self._key(source, depth, rank)]
        entry[0] = entry[0] * self.decay + (1.0 if accepted else 0.0)
        entry[1] = entry[1] * self.decay + 1.0


class CostModel:
    """Relative cost of verifying n tokens, learned from measured pass times.

    A pass time is modelled as base x ratio(size bucket): `base` (the one-token pass now) drifts
    as the context grows and as the machine gets busier or quieter, while the ratios (the shape
    of the cost curve) hardly move. Every pass updates the base, whatever its size. Absolute
    times per bucket went stale instead: a bucket measured in a noisy minute kept its time, the
    engine stopped drafting because of it, and with no drafts the bucket was never measured
    again (sampled runs fell back to plain decoding).

    A bucket's ratio is learned only from passes that one-token passes bracket closely (at most
    `bracket` passes from one to the next): their time over the two one-token times around
    them. Learning each pass against the base instead froze the ratio of whatever size a run
    mostly drafted (the base, fed by those passes, followed their own ratio), so the ratios
    stayed where the one calibration at the prompt put them, and on a shared CPU those moved
    by +-20% from run to run (8 rows measured 0.97x to 1.37x of one row in four calibrations
    within a minute): trees were sized on noise. Plain steps, the pace keeper's trials and
    steps whose drafts were all priced out give the brackets; a long stretch of big passes
    (a busy minute) teaches nothing, rightly. But on text where every step drafts (a run
    drafting far ahead) no bracket ever closed, and the ratios kept the calibration's noise
    for the whole process: one suite run drafted 2.3 nodes a pass where the run before
    drafted 5.4 on the same text. So a run asks for a plain step when `wants_one`: after
    `recheck` passes without one, and again half a bracket later, to close it."""

    def __init__(
        self,
        sizes=(1, 2, 4, 8, 16, 32, 64),
        ratio_weight: float = 0.1,
        bracket: int = 32,
        recheck: int = 96,
    ):
        self.sizes = list(sizes)
        self.ratio_weight, self.bracket, self.recheck = ratio_weight, bracket, recheck
        self.base: float | None = None
        self.ratios: dict[int, float] = {1: 1.0}
        self._one: float | None = None  # the last one-token pass's seconds
        self._since: list[tuple[int, float]] = []  # (bucket, seconds) of passes since then
        self._gap = 0  # passes since the last one-token pass
        self._open = False  # the last one-token pass came too late to close a bracket

    def _bucket(self, n: int) -> int:
        i = bisect.bisect_left(self.sizes, n)
        return self.sizes[min(i, len(self.sizes) - 1)]

    def observe(self, n: int, seconds: float, weight: float = 0.2) -> None:
        """One pass of n tokens took `seconds`; weight 1.0 sets instead of averaging (the
        calibration)."""
        b = self._bucket(n)
        ratio = self.ratios.get(b)
        if self.base is None:
            self.base = seconds / (ratio or 1.0)
            if ratio is None:  # nothing to compare a new size with yet
                return
        if b == 1:
            self._learn(seconds)
        elif ratio is None or weight >= 1.0:
            self.ratios[b] = seconds / self.base
        else:
            self._gap += 1
            if self._gap <= self.bracket:
                self._since.append((b, seconds))
        self.base = (1 - weight) * self.base + weight * seconds / self.ratios[b]

    def _learn(self, one: float) -> None:
        """A one-token pass closes a bracket: the passes since the last one learn their
        buckets' ratios against the mean of the two. One that comes too late to close a
        bracket opens one (`wants_one` then asks for the closing pass soon)."""
        self._open = self._one is None or self._gap > self.bracket
        if not self._open:
            around = 0.5 * (self._one + one)
            w = self.ratio_weight
            for b, seconds in self._since:
                self.ratios[b] = (1 - w) * self.ratios[b] + w * seconds / around
        self._one, self._since, self._gap = one, [], 0

    def wants_one(self) -> bool:
        """Whether the next step should be a plain one: `recheck` passes without one, then
        a second `bracket // 2` passes later, so the passes between learn their ratios."""
        due = self.bracket // 2 if self._open else self.recheck
        return self.ready() and self._gap >= due

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
            for src, rank in trie.ranks_at(node).items():
                self.estimator.record(src, depth, rank, ok)


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


class PaceKeeper:
    """Keeps a run at least as fast as plain decoding, judged by the clock, not by estimates.

    The trie's pricing and the drafter's gate each decide one step from estimates, and on text
    where drafts rarely hold (sampling, prose that never repeats) their small errors add up:
    a run paid a few percent more per step than its drafts saved. The keeper measures what a
    run actually gets: the wall time per token of steps that draft and of plain steps (no
    source asked, the trie just the root), each a decayed average of its recent steps. A run
    alternates a drafting stretch with a plain stretch and then decides: while drafting is
    faster, plain decoding is only re-measured in short trials after ever longer stretches
    (doubling, fourfold when drafting wins clearly, the longest at once when it is more than
    twice as fast), so the trials cost about a percent, and a stretch ends early when the
    drafting rate falls behind the last plain measurement; while
    plain is faster, the run decodes plainly for ever longer stretches and tries drafting
    again in short trials, so a text that starts repeating wins drafting back."""

    def __init__(
        self,
        draft_trial: int = 16,
        plain_trial: int = 4,
        first_hold: int = 32,
        max_hold: int = 1024,
        max_plain_hold: int = 256,
        warmup: int = 2,
        draft_decay: float = 0.98,
        plain_decay: float = 0.9,
        clear_win: float = 1.3,
        far_ahead: float = 2.0,
        margin: float = 1.02,
    ):
        self.draft_trial, self.plain_trial = draft_trial, plain_trial
        self.first_hold, self.max_hold = first_hold, max_hold
        # a text that starts repeating waits at most this many plain steps for drafting
        self.max_plain_hold = max_plain_hold
        # drafting's tokens per step come in bursts (a repeated phrase, then nothing): its
        # rate needs a longer memory than plain steps, which always write one token
        self.decay = {True: draft_decay, False: plain_decay}
        self.clear_win, self.far_ahead, self.warmup = clear_win, far_ahead, warmup
        # drafting must beat plain decoding by this much to go on: where the two are level,
        # measurement noise would otherwise keep a run drafting at a small loss
        self.margin = margin
        self.tokens = {True: 0.0, False: 0.0}  # drafting? -> decayed tokens and seconds
        self.seconds = {True: 0.0, False: 0.0}
        self.holds = {True: first_hold, False: first_hold}
        self.stretch = [(True, draft_trial), (False, plain_trial)]  # (drafting?, steps) left
        self.mode = True
        self._skip = warmup  # first drafting steps pay one-off costs (kernels, allocations)
        self._into = 0  # steps into the current stretch
        self.plain_steps = 0

    def rate(self, drafting: bool) -> float | None:
        """Measured tokens per second of drafting (True) or plain (False) steps."""
        seconds = self.seconds[drafting]
        return self.tokens[drafting] / seconds if seconds > 0 else None

    def drafting(self) -> bool:
        """Whether this step drafts (then `observe` its tokens and time)."""
        while self.stretch and self.stretch[0][1] <= 0:
            self.stretch.pop(0)
            self._into = 0
        if not self.stretch:
            self._decide()
        self.mode = self.stretch[0][0]
        self.stretch[0] = (self.mode, self.stretch[0][1] - 1)
        self._into += 1
        self.plain_steps += not self.mode
        return self.mode

    def observe(self, tokens: int, seconds: float) -> None:
        """The step `drafting` was last asked for wrote `tokens` in `seconds` of wall time."""
        if self.mode and self._skip > 0:
            self._skip -= 1
            return
        decay = self.decay[self.mode]
        self.tokens[self.mode] = self.tokens[self.mode] * decay + tokens
        self.seconds[self.mode] = self.seconds[self.mode] * decay + seconds
        self._cut_if_behind()

    def _cut_if_behind(self) -> None:
        """A long drafting stretch ends early once drafting's own rate falls behind the last
        plain measurement (the text changed): a plain trial then decides afresh."""
        drafted, plain = self.rate(True), self.rate(False)
        if (
            self.mode  # the stretch `propose` took this step from is stretch[0]
            and self.stretch
            and self.stretch[0][1] > 0
            and self._into >= self.draft_trial
            and drafted is not None
            and plain is not None
            and drafted < plain * self.margin
        ):
            self.stretch[0] = (True, 0)
            self.holds[True] = self.first_hold

    def _decide(self) -> None:
        drafted, plain = self.rate(True), self.rate(False)
        if drafted is None or plain is None or drafted >= plain * self.margin:
            lead = drafted / plain if drafted is not None and plain else 1.0
            # a plain trial costs the most where drafts are longest: far ahead, stop trying
            grow = 4 if lead > self.clear_win else 2
            hold = self.max_hold if lead > self.far_ahead else self.holds[True]
            self.holds = {True: min(self.max_hold, hold * grow), False: self.first_hold}
            self.stretch = [(True, hold), (False, self.plain_trial)]
        else:
            hold = self.holds[False]
            self.holds = {True: self.first_hold, False: min(self.max_plain_hold, hold * 2)}
            self.stretch = [(False, hold), (True, self.draft_trial)]
            # the trial judges drafting on the text as it is then, not as it was before
            self.tokens[True] = self.seconds[True] = 0.0
            self._skip = self.warmup

"""The "fastest" sampler: recursive rejection sampling down the trie.

At a walked node the target's processed distribution p meets the node's proposals in turn: a
learned drafter's children, drawn from its own processed distribution q without replacement,
are accepted with probability min(1, r(x) / q_i(x)) (q_i: q with the earlier draws taken out),
and every other child (n-gram, suffix, history: chosen without chance) as a point mass, with
probability r(x); a rejection leaves the residual r <- norm(max(r - q_i, 0)), and when every
proposal is rejected the token is drawn from what is left. Each step keeps the output exactly
distributed as p (SpecInfer; without replacement, Jeon et al. 2024), and a draft drawn from q
is accepted with probability 1 - TV(p, q), where the shared-noise coupling of the "same text"
sampler reaches only (1 - TV) / (1 + TV). The price: the same seed no longer writes the same
text with and without speculation (the distribution is the same).

Exact only while the numbers a node uses are fresh: the drafter's draws come from their own
noise per step, level and row (never the position's, which the residual draw reads), each
acceptance reads its own uniform by (position, proposal), and whether a node is kept in the
trie never depends on what a drafter drew below it (Run.build_trie prunes a drafter's tree apart
from the counting sources' and merges after)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from swiftwriter.engine.decoding.logits import Draws, GumbelRow, gumbel_max

FASTEST = "fastest"  # settings.SAMPLERS' rejection walk
_DRAFT_SALT = 0x6A09E667F3BCC908  # the drafters' noise and the acceptance uniforms: streams of
_ACCEPT_SALT = 0xBB67AE8584CAA73B  # their own, never the positions' (sqrt 2 and 3's fractions)
MAX_PROPOSALS = 1 << 12  # proposals per node a uniform index is kept apart for
_LEVELS = 64  # a drafter's levels and rows per level a step's noise index is kept apart for


@dataclass(frozen=True)
class DraftRecord:
    """What a drafter drew at one node: its processed distribution q over `ids` (full-vocabulary
    ids, float64 probabilities summing to 1) and the ids it drew from q, in draw order."""

    ids: torch.Tensor
    probs: torch.Tensor
    drawn: tuple[int, ...]


class RejectionDraws:
    """A run's extra random numbers: the drafters' noise, fresh for every drafting call, level
    and row, and the acceptance uniforms, one per (position, proposal)."""

    def __init__(self, seed: int):
        self._draft = Draws(seed ^ _DRAFT_SALT)
        self._accept = Draws(seed ^ _ACCEPT_SALT)
        self.calls = 0

    def next_call(self) -> Callable[[int, int, int], GumbelRow]:
        """The noise of one drafting call: (level, row, vocabulary size) -> a Gumbel row no other
        call, level or row reads."""
        call = self.calls
        self.calls += 1

        def noise(level: int, row: int, size: int) -> GumbelRow:
            if not (0 <= level < _LEVELS and 0 <= row < _LEVELS):
                raise ValueError(f"level {level} or row {row} beyond {_LEVELS}")
            return self._draft.row((call * _LEVELS + level) * _LEVELS + row, size)

        return noise

    def uniform(self, position: int, proposal: int) -> float:
        """The uniform the `proposal`-th proposal at text position `position` is judged with."""
        return self._accept.uniform(position * MAX_PROPOSALS + min(proposal, MAX_PROPOSALS - 1))


def resolve(
    processed: torch.Tensor,
    record: DraftRecord | None,
    children: Sequence[int],
    uniform: Callable[[int], float],
    noise: GumbelRow | torch.Tensor,
) -> tuple[int, bool]:
    """The token written at one node: (token, whether a proposal was accepted).

    `processed`: the target's processed logits there (one row, -inf where filtered); `record`:
    the drafter's draws at this node, if it drew; `children`: the trie's tokens under the node
    (the drafter's kept draws among them); `uniform(j)`: the j-th judged proposal's uniform;
    `noise`: the position's Gumbel noise, for the draw when every proposal is rejected (with
    none judged, that is plain decoding's own draw, bit for bit)."""
    kept = torch.nonzero(processed > float("-inf")).squeeze(-1)
    r = torch.softmax(processed[kept].double(), -1)
    where = {int(t): i for i, t in enumerate(kept.tolist())}
    judged = 0
    tried: set[int] = set()
    if record is not None and record.drawn:
        x, r, judged = _judge_draws(record, r, where, uniform, tried)
        if x is not None:
            return x, True
    x, r, judged = _judge_children(children, r, where, uniform, judged, tried)
    if x is not None:
        return x, True
    if judged == 0:
        return int(gumbel_max(processed, noise)), False
    scores = torch.where(r > 0, r.log(), torch.full_like(r, float("-inf")))
    return int(kept[(scores + noise[kept].to(torch.float64)).argmax()]), False


def _judge_draws(record: DraftRecord, r: torch.Tensor, where: dict, uniform, tried: set[int]):
    """The drafter's draws judged in order, each against what is left of the target (`r`)
    after the ones before it were rejected: (the accepted token or None, what is left of the
    target, how many were judged). Each draw judged goes into `tried`."""
    q_of = dict(zip(record.ids.tolist(), record.probs.tolist(), strict=True))
    q = torch.tensor([q_of.get(t, 0.0) for t in where], dtype=torch.float64)  # on p's support
    left = 1.0  # q's mass not yet drawn
    judged = 0
    for x in record.drawn:
        tried.add(x)
        qx = q_of.get(x, 0.0)
        if qx <= 0.0 or left <= qx * 1e-12:  # not a draw from what is left of q
            break
        i = where.get(x)
        rx = float(r[i]) if i is not None else 0.0
        u = uniform(judged)
        judged += 1
        if u * (qx / left) < rx:
            return x, r, judged
        rest = torch.clamp(r - q / left, min=0.0)
        total = float(rest.sum())
        if total <= 0.0:  # r <= q_i everywhere: acceptance was certain up to rounding
            return x, r, judged
        r = rest / total
        left -= qx
        if i is not None:
            q[i] = 0.0
    return None, r, judged


def _judge_children(children, r: torch.Tensor, where: dict, uniform, judged: int, tried: set):
    """The trie's other children judged as proposals of certain probability, against what is
    left of the target: (the accepted token or None, what is left, how many judged so far)."""
    for x in children:
        if x in tried:
            continue
        tried.add(x)
        i = where.get(x)
        if i is None or float(r[i]) <= 0.0:
            continue  # no chance here: judging it changes nothing
        u = uniform(judged)
        judged += 1
        if u < float(r[i]):
            return x, r, judged
        r = r.clone()
        r[i] = 0.0
        r = r / r.sum()
    return None, r, judged

"""The "fastest" sampler's node (rejection.resolve) against numbers computed by hand: whatever
the drafter's q and the other children, the token written has exactly the target's p (a
chi-square test whose power against the naive rule, "on a rejection draw from p", is shown
from the same counts), and one draft from q is accepted with probability 1 - TV(p, q), above
the shared-noise coupling's (1 - TV) / (1 + TV)."""

from __future__ import annotations

import torch
from swiftwriter.engine.decoding.logits import Draws
from swiftwriter.engine.decoding.rejection import DraftRecord, RejectionDraws, resolve

P = torch.tensor([0.30, 0.22, 0.16, 0.12, 0.09, 0.06, 0.05, 0.0], dtype=torch.float64)
Q = torch.tensor([0.18, 0.30, 0.10, 0.16, 0.04, 0.02, 0.0, 0.20], dtype=torch.float64)
CRITICAL = 24.3  # chi-square, 7 degrees of freedom, 0.999 quantile
N = 5_000


def processed_row(p: torch.Tensor) -> torch.Tensor:
    return torch.where(p > 0, p.log(), torch.full_like(p, float("-inf"))).float()


def draw_without_replacement(q: torch.Tensor, k: int, noise) -> tuple[int, ...]:
    """k ids from q without replacement: the top k of log q + Gumbel noise."""
    scores = torch.where(q > 0, q.log(), torch.full_like(q, float("-inf"))) + noise
    top = scores.topk(k)
    return tuple(int(i) for i, s in zip(top.indices, top.values, strict=True) if s > -1e300)


def chi_square(counts: dict[int, int], p: torch.Tensor, n: int) -> float:
    return sum(
        (counts.get(i, 0) - n * float(p[i])) ** 2 / (n * float(p[i]))
        for i in range(len(p))
        if p[i] > 0
    )


def sample_nodes(k: int, children: tuple[int, ...], seed: int):
    """N tokens written at a node with p = P, a drafter drawing k from Q, and `children`."""
    extra = RejectionDraws(seed)
    positions = Draws(seed + 1)
    processed = processed_row(P.float().double())
    record_ids = torch.arange(len(Q))
    counts: dict[int, int] = {}
    accepted = 0
    for t in range(N):
        noise = extra.next_call()(0, 0, len(Q))[record_ids]
        drawn = draw_without_replacement(Q, k, noise) if k else ()
        record = DraftRecord(record_ids, Q, drawn) if k else None
        token, ok = resolve(
            processed,
            record,
            tuple(dict.fromkeys(drawn + children)),
            lambda j, t=t: extra.uniform(t, j),
            positions.row(t, len(P)),
        )
        counts[token] = counts.get(token, 0) + 1
        accepted += ok
    return counts, accepted / N


def test_one_draft_is_exact_and_accepted_at_one_minus_tv():
    counts, rate = sample_nodes(1, (), seed=3)
    assert set(counts) <= {i for i in range(len(P)) if P[i] > 0}
    assert chi_square(counts, P, N) < CRITICAL, counts
    tv = 0.5 * float((P - Q).abs().sum())
    assert abs(rate - (1 - tv)) < 0.025, (rate, 1 - tv)
    assert rate > (1 - tv) / (1 + tv) + 0.1  # what the shared noise would reach


def test_several_drafts_and_point_masses_are_exact_and_accept_more():
    counts, rate = sample_nodes(3, (6, 0), seed=5)
    assert chi_square(counts, P, N) < CRITICAL, counts
    tv = 0.5 * float((P - Q).abs().sum())
    assert rate > (1 - tv) + 0.1  # one draft's acceptance (the test above)


def test_point_masses_alone_are_exact_and_accepted_at_their_mass():
    counts, rate = sample_nodes(0, (2, 7, 4), seed=9)
    assert chi_square(counts, P, N) < CRITICAL, counts
    assert abs(rate - float(P[2] + P[4])) < 0.025  # token 7 has no chance under p


def test_the_chi_square_has_the_power_to_see_the_naive_rule():
    """Accept a draft from q with min(1, p/q), else draw from p itself: its distribution is
    q min(1, p/q) + TV p, which the same N draws would tell from p far beyond the critical
    value."""
    tv = 0.5 * float((P - Q).abs().sum())
    naive = torch.minimum(P, Q) + tv * P
    shift = sum(
        (N * float(naive[i]) - N * float(P[i])) ** 2 / (N * float(P[i]))
        for i in range(len(P))
        if P[i] > 0
    )
    assert shift > 10 * CRITICAL


def test_nothing_proposed_is_plain_decoding_s_own_draw():
    """A node without children draws the token plain decoding draws with the same noise, so
    `ar` writes one text whichever sampler the app runs."""
    from swiftwriter.engine.decoding.logits import gumbel_max

    positions = Draws(4)
    processed = processed_row(P)
    for t in range(200):
        noise = positions.row(t, len(P))
        token, ok = resolve(processed, None, (), lambda j: 0.5, noise)
        assert (token, ok) == (int(gumbel_max(processed, noise)), False)


def test_the_streams_are_fresh_per_call_level_row_and_position():
    extra = RejectionDraws(11)
    first, second = extra.next_call(), extra.next_call()
    ids = list(range(64))
    rows = [first(0, 0, 64)[ids], first(1, 0, 64)[ids], first(0, 1, 64)[ids], second(0, 0, 64)[ids]]
    for a in range(len(rows)):
        for b in range(a + 1, len(rows)):
            assert not torch.equal(rows[a], rows[b])
    assert extra.uniform(5, 0) != extra.uniform(5, 1) != extra.uniform(6, 0)
    assert RejectionDraws(11).uniform(5, 0) == extra.uniform(5, 0)  # by position, not by order

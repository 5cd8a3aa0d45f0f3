"""The sampler against numbers computed by hand, not by the pipeline under test: temperature
divides, top-p keeps the smallest head with the mass asked for, min-p cuts relative to the top,
and the draw (Gumbel-max with the run's position-hashed noise) has exactly that distribution
(60,000 draws with production-like settings, a chi-square test that a 5% bias on one token
fails)."""

from __future__ import annotations

import math

import pytest
import torch
from swiftwriter.engine.decoding.logits import Draws, LogitsPipeline
from swiftwriter.engine.decoding.settings import SamplingSettings

LOGITS = [3.0, 2.6, 2.2, 1.9, 1.5, 1.0, 0.2, -0.5] + [-4.0] * 56


def by_hand(logits, temperature, top_p, min_p):
    """softmax(logits / T), then top-p (keep the most likely tokens until their mass reaches
    top_p), renormalise, then min-p (drop p < min_p * max p), renormalise."""
    z = [x / temperature for x in logits]
    top = max(z)
    e = [math.exp(v - top) for v in z]
    total = sum(e)
    p = [v / total for v in e]
    order = sorted(range(len(p)), key=lambda i: -p[i])
    kept, mass = [], 0.0
    for i in order:
        kept.append(i)
        mass += p[i]
        if mass >= top_p:
            break
    q = {i: p[i] / mass for i in kept}
    best = max(q.values())
    q = {i: v for i, v in q.items() if v >= min_p * best}
    norm = sum(q.values())
    return {i: v / norm for i, v in q.items()}


SETTINGS = SamplingSettings(greedy=False, penalty=1.0, temperature=0.7, top_p=0.9, min_p=0.05)


def test_processed_logits_match_the_hand_computation():
    want = by_hand(LOGITS, 0.7, 0.9, 0.05)
    processed = LogitsPipeline(SETTINGS).process(torch.tensor(LOGITS), None)
    kept = torch.nonzero(processed != float("-inf")).squeeze(-1).tolist()
    assert kept == sorted(want)
    probs = processed.softmax(-1)
    for i, p in want.items():
        assert abs(float(probs[i]) - p) < 1e-6, (i, float(probs[i]), p)
    # the hand computation itself: a colder temperature sharpens, top-p drops the tail
    assert len(by_hand(LOGITS, 0.7, 0.9, 0.0)) < len(by_hand(LOGITS, 1.4, 0.9, 0.0))
    assert len(by_hand(LOGITS, 0.7, 0.5, 0.0)) < len(by_hand(LOGITS, 0.7, 0.99, 0.0))


def test_the_draw_has_the_hand_computed_distribution():
    want = by_hand(LOGITS, 0.7, 0.9, 0.05)
    pipeline = LogitsPipeline(SETTINGS)
    processed = pipeline.process(torch.tensor(LOGITS), None)
    assert len(want) * 2 <= len(LOGITS)  # most tokens filtered out: never drawn
    draws = Draws(11)
    n = 60_000
    counts: dict[int, int] = {}
    for i in range(n):
        token = pipeline.choose(processed, draws.gumbel(i, len(LOGITS)))
        counts[token] = counts.get(token, 0) + 1
    assert set(counts) <= set(want)
    chi2 = sum((counts.get(i, 0) - n * p) ** 2 / (n * p) for i, p in want.items())
    # df = len(want) - 1 <= 7; the 0.999 quantile of chi-square with 7 df is 24.3
    assert chi2 < 24.3, (chi2, counts)
    biased = dict(want)
    top = max(biased, key=biased.get)
    biased[top] *= 1.05  # what a 5% bias would look like in the same counts
    shift = sum((n * biased[i] - n * p) ** 2 / (n * p) for i, p in want.items())
    assert shift > 2 * 24.3  # so the test above has the power to see it


def test_the_uniforms_are_uniform_and_differ_by_seed():
    """The position-hashed uniforms: mean 1/2, variance 1/12, in [0, 1), no correlation
    between neighbours, and another seed gives other numbers."""
    n = 50_000
    u = [Draws(3).uniform(i) for i in range(n)]
    assert all(0.0 <= x < 1.0 for x in u)
    mean = sum(u) / n
    var = sum((x - mean) ** 2 for x in u) / n
    lag = sum((u[i] - mean) * (u[i + 1] - mean) for i in range(n - 1)) / (n * var)
    assert abs(mean - 0.5) < 0.005 and abs(var - 1 / 12) < 0.002 and abs(lag) < 0.02
    other = [Draws(4).uniform(i) for i in range(100)]
    assert sum(a == b for a, b in zip(u[:100], other, strict=True)) == 0
    assert Draws(3).uniform(17) == u[17]  # by position, not by how many were drawn before


def test_the_noise_is_standard_gumbel_by_position_and_differs_by_seed():
    """Gumbel(0, 1): mean is Euler's constant, variance pi^2 / 6; the numbers for a position
    are the same whoever asks first, and another seed or position gives others."""
    draws = Draws(3)
    g = torch.cat([draws.gumbel(i, 1000) for i in range(50)])
    assert abs(float(g.mean()) - 0.5772157) < 0.02
    assert abs(float(g.var()) - math.pi**2 / 6) < 0.05
    later = Draws(3)
    later.gumbel(40, 1000)
    assert torch.equal(later.gumbel(7, 1000), draws.gumbel(7, 1000))
    assert not torch.equal(draws.gumbel(8, 1000), draws.gumbel(7, 1000))
    assert not torch.equal(Draws(4).gumbel(7, 1000), draws.gumbel(7, 1000))


def test_the_noise_read_at_a_few_ids_is_the_whole_row_s_bit_for_bit():
    """The draw reads a position's noise at the ids its filters keep (GumbelRow): every subset,
    in any order and of any length, gives exactly the whole row's numbers there, so a draw over
    the kept ids and one over the whole row pick the same token."""
    draws = Draws(21)
    whole = draws.gumbel(5, 49152)
    row = draws.row(5, 49152)
    gen = torch.Generator().manual_seed(0)
    for n in (1, 2, 3, 7, 8, 9, 31, 64, 1000, 8192):
        ids = torch.randperm(49152, generator=gen)[:n]
        assert torch.equal(row[ids], whole[ids])
    assert torch.equal(row[[0, 49151]], whole[[0, 49151]])
    assert torch.equal(row.to(torch.float32), whole.float())
    assert not torch.equal(draws.row(6, 49152)[ids], row[ids])
    with pytest.raises(IndexError):
        row[[49152]]


def test_a_drafter_that_shares_the_noise_agrees_with_the_target_as_the_coupling_promises():
    """argmax(log q + g) = argmax(log p + g) with probability >= (1 - TV) / (1 + TV) (Daliri,
    Musco and Suresh 2024): measured over 4,000 positions for a q near p, far above what
    proposing q's most likely token gets (p of that token)."""
    p = torch.tensor([0.30, 0.25, 0.20, 0.15, 0.10])
    q = torch.tensor([0.26, 0.28, 0.20, 0.14, 0.12])
    tv = 0.5 * float((p - q).abs().sum())
    draws = Draws(9)
    n = 4000
    agree = 0
    for i in range(n):
        g = draws.gumbel(i, 5)
        agree += int((p.log() + g).argmax() == (q.log() + g).argmax())
    bound = (1 - tv) / (1 + tv)
    assert agree / n > bound - 0.02 and agree / n > 0.85
    assert float(p[q.argmax()]) < 0.3  # proposing q's mode would be accepted 25% of the time

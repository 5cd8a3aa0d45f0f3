"""The scipy-free two-sample tests against values known in closed form or worked out by hand."""

from __future__ import annotations

import math

import pytest
from swiftwriter.bench.stattest import mean_std, permutation_p, t_two_sided_p, welch


def test_student_t_tail_closed_forms():
    # df = 1 is the Cauchy distribution: P(|T| >= 1) = 1/2.
    assert t_two_sided_p(1.0, 1) == pytest.approx(0.5, abs=1e-10)
    # df = 2: P(|T| >= t) = 1 - t / sqrt(2 + t^2).
    for t in (0.3, 2.0, 7.5):
        assert t_two_sided_p(t, 2) == pytest.approx(1 - t / math.sqrt(2 + t * t), abs=1e-10)
    # Large df: the normal tail, P(|Z| >= 1.96) = 0.04999579.
    assert t_two_sided_p(1.959964, 1e7) == pytest.approx(0.05, abs=1e-5)
    # df = 4: F(t) = 1/2 + 3/8 * t / sqrt(1 + t^2/4) * (1 - u/12), u = t^2 / (1 + t^2/4).
    for t in (0.5, 2.0, 3.674):
        u = t * t / (1 + t * t / 4)
        tail = 2 * (0.5 - 3 / 8 * t / math.sqrt(1 + t * t / 4) * (1 - u / 12))
        assert t_two_sided_p(t, 4) == pytest.approx(tail, abs=1e-12)
    assert t_two_sided_p(0.0, 5) == pytest.approx(1.0)


def test_welch_by_hand():
    # a: mean 2, var 1; b: mean 5, var 1; se^2 = 1/3 + 1/3, t = -3 / sqrt(2/3),
    # df = (2/3)^2 / ((1/3)^2/2 * 2) = 4.
    r = welch([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert r["t"] == pytest.approx(-3 / math.sqrt(2 / 3))
    assert r["df"] == pytest.approx(4.0)
    assert r["p"] == pytest.approx(t_two_sided_p(3 / math.sqrt(2 / 3), 4))  # about 0.0213
    assert welch([1.0], [2.0, 3.0]) == {"t": None, "df": None, "p": None}
    assert welch([1.0, 1.0], [1.0, 1.0])["p"] == 1.0
    assert welch([1.0, 1.0], [2.0, 2.0])["p"] == 0.0


def test_permutation_by_hand():
    # 6 values, 20 splits into 3 + 3: only {1,2,3}|{4,5,6} and its mirror are as extreme.
    assert permutation_p([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == pytest.approx(2 / 20)
    assert permutation_p([1.0, 2.0], [1.0, 2.0]) == 1.0
    assert permutation_p([], [1.0]) is None
    # Too many splits for the exact count: a seeded estimate, still small for far-apart groups.
    a, b = [float(i) for i in range(12)], [float(i) + 20 for i in range(12)]
    assert permutation_p(a, b, exact_limit=100) < 0.001


def test_mean_std():
    assert mean_std([]) == (None, None)
    assert mean_std([4.0]) == (4.0, 0.0)
    m, s = mean_std([1.0, 2.0, 3.0, 4.0])
    assert m == 2.5 and s == pytest.approx(math.sqrt(5 / 3))

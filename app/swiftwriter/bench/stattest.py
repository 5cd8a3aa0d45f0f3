"""Small two-sample tests for the benchmark's several-seed comparisons (is tokenswift's Distinct-n
the same as transformers' own sampling?), without scipy: it is not a dependency.

- Welch's t-test (unequal variances), two-sided p from Student's t via the regularised
  incomplete beta function (continued fraction, as in Numerical Recipes).
- A two-sided permutation test on the difference of means: exact over all splits when they
  are few (at most `exact_limit`), otherwise a seeded Monte Carlo estimate."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence


def mean_std(xs: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (n - 1); std is 0.0 for one value, both None for none."""
    n = len(xs)
    if n == 0:
        return None, None
    m = sum(xs) / n
    if n == 1:
        return m, 0.0
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))


def _betacf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
    ln += b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(ln) * _betacf(a, b, x) / a
    return 1.0 - math.exp(ln) * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom."""
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def welch(a: Sequence[float], b: Sequence[float]) -> dict:
    """{'t', 'df', 'p'} for mean(a) - mean(b); None entries when a group has < 2 values.
    Both groups constant: p = 1 when the means are equal, else 0 (t, df None)."""
    if len(a) < 2 or len(b) < 2:
        return {"t": None, "df": None, "p": None}
    (ma, sa), (mb, sb) = mean_std(a), mean_std(b)
    va, vb = sa * sa / len(a), sb * sb / len(b)
    if va + vb == 0.0:
        return {"t": None, "df": None, "p": 1.0 if ma == mb else 0.0}
    t = (ma - mb) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va * va / (len(a) - 1) + vb * vb / (len(b) - 1))
    return {"t": t, "df": df, "p": t_two_sided_p(t, df)}


def permutation_p(
    a: Sequence[float],
    b: Sequence[float],
    exact_limit: int = 20_000,
    draws: int = 10_000,
    seed: int = 0,
) -> float | None:
    """Share of relabellings whose |mean difference| is at least the observed one."""
    if not a or not b:
        return None
    pooled = list(a) + list(b)
    n, k, total = len(pooled), len(a), sum(pooled)
    observed = abs(sum(a) / k - sum(b) / (n - k))
    eps = 1e-12 * max(1.0, abs(observed))

    def extreme(sum_a: float) -> bool:
        return abs(sum_a / k - (total - sum_a) / (n - k)) >= observed - eps

    if math.comb(n, k) <= exact_limit:
        splits = itertools.combinations(pooled, k)
        hits = count = 0
        for group in splits:
            count += 1
            hits += extreme(sum(group))
        return hits / count
    rng = random.Random(seed)
    hits = sum(extreme(sum(rng.sample(pooled, k))) for _ in range(draws))
    return (hits + 1) / (draws + 1)

"""Quality of long outputs, measured on the generated token ids: how varied the text is and
how much it repeats itself as it grows. Speed is only worth having if these do not fall.

- Distinct-n (n = 1..4): unique n-grams / all n-grams of the generated tokens (TokenSwift
  reports Distinct-1..4; 1.0 = nothing repeats, near 0 = a loop). None when the output holds
  no n-gram of that size.
- Repetition rate (n-gram size `n`, default 4; window `window` tokens, default 1,000): the
  n-gram ending at each generated token is a *repeat* when the same n-gram already ended at an
  earlier position of the generated text (anywhere earlier, the same window included). The rate
  of a window is repeats / n-grams ending inside it; windows are consecutive blocks of `window`
  generated tokens (the last one may be shorter). Over the whole output the rate equals
  1 - Distinct-n; per window it shows whether a long output drifts into loops.

Computed once at the end of a run, never per step (sets of tuples, linear in the length)."""

from __future__ import annotations

from collections.abc import Sequence


def ngrams(tokens: Sequence[int], n: int) -> list[tuple[int, ...]]:
    """All n-grams in order (empty when there are fewer than n tokens)."""
    return list(zip(*(tokens[i:] for i in range(n)), strict=False))


def distinct(tokens: Sequence[int], n: int) -> float | None:
    """Unique n-grams / all n-grams, or None when there is no n-gram."""
    grams = ngrams(tokens, n)
    return len(set(grams)) / len(grams) if grams else None


def repetition_by_window(tokens: Sequence[int], n: int = 4, window: int = 1000) -> list[float]:
    """Per block of `window` generated tokens: the share of the n-grams ending in it that
    already ended earlier in the text. Blocks without an n-gram are left out."""
    if n < 1 or window < 1:
        raise ValueError("n and window must be at least 1")
    seen: set[tuple[int, ...]] = set()
    repeats = [0] * ((len(tokens) + window - 1) // window)
    totals = [0] * len(repeats)
    for start, gram in enumerate(ngrams(tokens, n)):
        block = (start + n - 1) // window  # the block of the n-gram's last token
        totals[block] += 1
        if gram in seen:
            repeats[block] += 1
        else:
            seen.add(gram)
    return [r / t for r, t in zip(repeats, totals, strict=True) if t]


def summary(tokens: Sequence[int], n: int = 4, window: int = 1000, digits: int = 4) -> dict:
    """The quality entry of run statistics and of the benchmark report."""
    tokens = [int(t) for t in tokens]

    def rounded(x):
        return None if x is None else round(x, digits)

    exact = {k: distinct(tokens, k) for k in sorted({1, 2, 3, 4, n})}
    out = {f"distinct_{k}": rounded(exact[k]) for k in (1, 2, 3, 4)}
    dn = exact[n]
    out["repetition_n"] = n
    out["repetition_window"] = window
    out["repetition_rate"] = None if dn is None else round(1.0 - dn, digits)
    out["repetition_by_window"] = [
        round(r, digits) for r in repetition_by_window(tokens, n, window)
    ]
    return out

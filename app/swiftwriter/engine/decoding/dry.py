"""DRY ("don't repeat yourself"), a sequence-aware repetition penalty on token ids.

The token-window penalty punishes every token seen recently, words like "the" included; DRY
punishes only the token that would *continue a repeat*. For each candidate c: n = the longest
run such that the last n context tokens followed by c already occur in the context. If
n >= allowed_length, c's logit loses multiplier * base ** (n - allowed_length). As in
text-generation-webui's DRY sampler (without sequence breakers: we work on token ids), with n
capped at MAX_MATCH so the exponent stays finite and the worst case stays cheap.

Cost: one vectorised comparison of the MAX_MATCH tokens before each earlier copy of the newest
token with the MAX_MATCH tokens before the end, per trie node: small for prose, largest when
every token is the same (the worst case, still bounded by MAX_MATCH)."""

from __future__ import annotations

import numpy as np

MAX_MATCH = 50


def _matches(context: np.ndarray, max_match: int) -> tuple[np.ndarray, np.ndarray]:
    """(candidate token, n) for each earlier copy of the context's last token."""
    size = len(context)
    pos = np.flatnonzero(context[:-1] == context[-1]) if size > 1 else np.zeros(0, np.int64)
    if pos.size == 0:
        return pos, pos
    # One (copies x max_match) comparison: entry (j, k) says whether the token k places before
    # copy j equals the token k places before the end. n = the count of leading matches.
    k = np.arange(min(max_match, size - 1))
    back = pos[:, None] - k[None, :]
    same = (back >= 0) & (context[np.maximum(back, 0)] == context[size - 1 - k][None, :])
    return context[pos + 1], np.where(same.all(axis=1), len(k), same.argmin(axis=1))


def _longest(tokens: np.ndarray, lengths: np.ndarray) -> dict[int, int]:
    order = np.argsort(lengths, kind="stable")  # ascending: a later (longer) entry wins
    return dict(zip(tokens[order].tolist(), lengths[order].tolist(), strict=True))


def match_lengths(context: np.ndarray, max_match: int = MAX_MATCH) -> dict[int, int]:
    """{candidate token: longest n} for every token that follows an earlier occurrence of the
    context's last token. `context`: 1-D int array, oldest first."""
    return _longest(*_matches(np.asarray(context), max_match))


def penalties(
    context: np.ndarray, multiplier: float, base: float, allowed_length: int
) -> tuple[list[int], list[float]]:
    """(token ids, amounts to subtract from their logits); empty when nothing repeats enough."""
    if multiplier == 0:
        return [], []
    tokens, lengths = _matches(np.asarray(context), MAX_MATCH)
    keep = lengths >= allowed_length
    if not keep.any():
        return [], []
    longest = _longest(tokens[keep], lengths[keep])
    return list(longest), [multiplier * base ** (n - allowed_length) for n in longest.values()]

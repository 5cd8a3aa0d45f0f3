"""Counting sources (n-grams, suffix matches, history) under the sampler's noise: they rank
their continuations in the order their own counts draw them with the target's Gumbel noise, so
their first candidate is the token the target draws whenever the two distributions agree; the
text stays plain decoding's for a seed."""

from __future__ import annotations

import math
import random

import torch
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.history_source import HistorySource
from swiftwriter.engine.decoding.logits import Draws, gumbel_max
from swiftwriter.engine.decoding.sources import NGramSource, SuffixMatchSource, coupled_order

VOCAB = 50
SAMPLING = SamplingSettings(greedy=False, seed=0)


def fixed_noise(values: dict[int, dict[int, float]]):
    """noise(k): zeros but the given {token: value} at depth k."""

    def noise(k: int) -> torch.Tensor:
        g = torch.zeros(VOCAB, dtype=torch.float64)
        for token, value in values.get(k, {}).items():
            g[token] = value
        return g

    return noise


def test_the_order_follows_log_weight_plus_noise_branch_by_branch():
    paths = [(1, 2, 9), (1, 3, 9), (4, 5, 9), (6, 7, 9)]
    weights = [1.0, 3.0, 2.0, 1.0]
    # depth 0: token 1 holds weight 4 (log 1.39), 4 holds 2 (0.69 + 1.0), 6 holds 1 (0 + 2.0)
    # depth 1 below 1: 2 (log 1 + 1.5) beats 3 (log 3 = 1.10)
    noise = fixed_noise({0: {4: 1.0, 6: 2.0}, 1: {2: 1.5}})
    order, ranks = coupled_order(paths, weights, noise)
    assert order == [3, 2, 0, 1]  # 6 (2.0) > 4 (1.69) > 1 (1.39); below 1: 2 before 3
    assert ranks == [(2, 0, 0), (2, 1, 0), (1, 0, 0), (0, 0, 0)]
    # without noise the weights alone decide: the most counted branch first
    order, _ = coupled_order(paths, weights, fixed_noise({}))
    assert order == [1, 0, 2, 3]


def test_noise_is_read_only_where_paths_branch():
    asked = []

    def noise(k):
        asked.append(k)
        return torch.zeros(VOCAB, dtype=torch.float64)

    coupled_order([(1, 2, 3, 4), (1, 2, 5, 6)], [1.0, 1.0], noise)
    assert asked == [2]


def ngram_with(counts: dict[tuple[int, ...], int], key: int = 10) -> NGramSource:
    source = NGramSource()
    for cont, count in counts.items():
        source.table.add_sequence([key, *cont], weight=count)
    return source


def test_the_first_ngram_candidate_is_the_targets_draw_when_the_counts_are_its_distribution():
    """Target p = the table's own frequencies: the coupled first candidate is the target's
    Gumbel-max draw at every seed; the most counted one only as often as its probability."""
    counts = {(1, 2, 3): 5, (4, 2, 3): 3, (6, 2, 3): 2, (7, 2, 3): 2}
    total = sum(counts.values())
    logp = torch.full((VOCAB,), -math.inf, dtype=torch.float64)
    for cont, count in counts.items():
        logp[cont[0]] = math.log(count / total)
    hits = {True: 0, False: 0}
    for seed in range(200):
        draws = Draws(seed)
        target = int(gumbel_max(logp, draws.gumbel(0, VOCAB)))
        for coupled in (True, False):
            source = ngram_with(counts)
            source.start(SAMPLING, VOCAB)
            if coupled:
                source.couple(lambda k, d=draws: d.gumbel(k, VOCAB))
            first = source.propose([5, 10], 20)[0]
            hits[coupled] += first.tokens[0] == target
    assert hits[True] == 200
    assert hits[False] < 0.6 * 200  # 5/12 in expectation


def test_greedy_and_uncoupled_runs_keep_the_most_counted_first():
    source = ngram_with({(1, 2, 3): 1, (4, 5, 6): 4, (7, 8, 9): 2})
    source.couple(fixed_noise({0: {1: 9.0}}))
    source.start(SamplingSettings(greedy=True), VOCAB)  # a new run forgets the noise
    cands = source.propose([10], 20)
    assert [c.tokens for c in cands] == [(4, 5, 6), (7, 8, 9), (1, 2, 3)]
    assert [c.rank for c in cands] == [0, 1, 2] and all(c.ranks is None for c in cands)
    source.couple(fixed_noise({0: {1: 9.0}}))
    cands = source.propose([10], 20)
    assert [c.tokens for c in cands] == [(1, 2, 3), (4, 5, 6), (7, 8, 9)]
    assert [c.ranks for c in cands] == [(0, 0, 0), (1, 0, 0), (2, 0, 0)]


def test_suffix_matches_keep_the_longest_first_and_rank_within_a_length():
    source = SuffixMatchSource(max_len=3, match_lengths=(3, 2))
    # "8 9 3" occurs once (followed by 11), "9 3" also twice more (followed by 12, 13)
    source.observe([9, 3, 12, 0, 9, 3, 13, 0, 8, 9, 3, 11, 0, 0, 8, 9, 3])
    plain = source.propose([8, 9, 3], 10)
    assert [c.tokens[0] for c in plain] == [11, 13, 12]  # longest match, then most recent
    source.couple(fixed_noise({0: {12: 5.0}}))
    coupled = source.propose([8, 9, 3], 10)
    assert [c.tokens[0] for c in coupled] == [11, 12, 13]
    assert [c.rank for c in coupled] == [0, 1, 2]


def test_history_candidates_ranked_under_the_noise():
    history = [[1, 2, 3, 4, 5, 20], [1, 2, 3, 4, 5, 21], [1, 2, 3, 4, 5, 21], [7, 3, 4, 5, 22]]
    source = HistorySource(sequences=history, defer_to_context=False, min_prob=0.0)
    context = [30, 2, 3, 4, 5]
    plain = [c.tokens[0] for c in source.propose(context, 10)]
    assert plain[0] == 21  # the most frequent continuation
    source.couple(fixed_noise({0: {20: 4.0}}))
    assert [c.tokens[0] for c in source.propose(context, 10)][0] == 20
    assert sorted(plain) == sorted(c.tokens[0] for c in source.propose(context, 10))


def test_coupled_counting_sources_write_plain_decodings_text(tiny_llama):
    rng = random.Random(3)
    phrase = [rng.randrange(2, 250) for _ in range(7)]
    prompt = [t if rng.random() > 0.15 else rng.randrange(2, 250) for t in (phrase * 14)[:90]]
    sampling = SamplingSettings(greedy=False, temperature=0.8, top_p=0.95, min_p=0.05)
    drafting = DraftSettings(sources=("ngram", "suffix"), max_nodes=16, adaptive=False)
    for seed in range(3):
        plain = Generator(tiny_llama, sampling, DraftSettings.plain())
        want = [t for ev in plain.generate(prompt, 48, seed=seed) for t in ev.tokens]
        gen = Generator(tiny_llama, sampling, drafting)
        got = [t for ev in gen.generate(prompt, 48, seed=seed) for t in ev.tokens]
        assert got == want, seed
        assert gen.stats.drafted_nodes > 0

"""How the engine learns which drafts hold: the suffix source's copy over a short loop, each
source's acceptance learned under its own rank, and a prior that fades with evidence. Each of
these cost speed, never exactness, on text that repeats (greedy decoding with a penalty can
fall into a loop of a few words), so only direct checks see them."""

from __future__ import annotations

from swiftwriter.engine.decoding.estimate import AcceptanceEstimator, ShadowLearner
from swiftwriter.engine.decoding.sources import Candidate, SuffixMatchSource
from swiftwriter.engine.decoding.trie import build_trie, prune


def test_suffix_copy_goes_on_over_its_own_output_in_a_short_loop():
    loop = [5, 6, 7, 8, 9]
    src = SuffixMatchSource(max_len=12, match_lengths=(3,))
    src.observe([1, 2, 3] + loop * 3)
    found = src.propose(src.tokens, 4)
    # most recent occurrence first: five tokens back, whose text ends after one period
    assert found[0].tokens == tuple((loop * 3)[:12])
    # every older occurrence proposes the same continuation, so it is proposed once
    assert len(found) == 1


def test_suffix_copy_of_a_match_far_from_the_end_is_plain_text():
    src = SuffixMatchSource(max_len=4, match_lengths=(2,))
    src.observe([1, 2, 3, 4, 5, 6, 7, 8, 1, 2])
    assert src.propose(src.tokens, 4)[0].tokens == (3, 4, 5, 6)


def test_a_shared_node_is_learned_under_each_sources_own_rank():
    est = AcceptanceEstimator()
    learner = ShadowLearner(est, horizon=2)
    cands = [Candidate("ngram", (40, 41), rank=2), Candidate("suffix", (40, 41), rank=0)]
    trie = build_trie(1, cands, est, max_depth=4)
    assert trie.ranks_at(1) == {"ngram": 2, "suffix": 0}
    learner.add(1, prune(trie, 2))  # pruning keeps what each source ranked
    learner.update([1, 40, 41])
    # before, the node's one rank (the winning estimate's, here ngram's 2) was used for both
    assert est.stats[("suffix", 1, 0)][0] == 1.0 and est.stats[("suffix", 2, 0)][0] == 1.0
    assert est.stats[("ngram", 1, 2)][0] == 1.0 and ("suffix", 1, 2) not in est.stats


def test_the_prior_fades_for_a_source_that_is_always_right():
    est = AcceptanceEstimator()
    assert abs(est("suffix", 8, 0) - 0.05) < 1e-9  # no evidence: the pessimistic prior
    for _ in range(300):
        est.record("suffix", 8, 0, True)
        est.record("ngram", 1, 0, False)
    # a fixed prior held this at 0.91, and a chain of 14 such nodes at a quarter
    assert est("suffix", 8, 0) > 0.98
    assert est("suffix", 8, 0) ** 14 > 0.75
    assert est("ngram", 1, 0) < 0.01
    for _ in range(3):
        est.record("suffix", 3, 0, True)
    assert est("suffix", 3, 0) < 0.4  # three offers are not yet evidence of a sure thing

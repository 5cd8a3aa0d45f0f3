"""Pruning a draft trie keeps the root and exactly the `keep` most probable nodes, parents
before children, with the children maps rebuilt (an off-by-one here costs speed, not
exactness, so only a direct check sees it)."""

from __future__ import annotations

from swiftwriter.engine.decoding.trie import Trie, prune


def star_and_chain() -> Trie:
    # root 0; children 1 (p .9), 2 (p .5), 3 (p .2); 1 -> 4 (p .8) -> 5 (p .6)
    return Trie(
        tokens=[7, 11, 12, 13, 21, 31],
        parents=[-1, 0, 0, 0, 1, 4],
        depths=[0, 1, 1, 1, 2, 3],
        sources=[()] + [("ngram",)] * 5,
        ranks=[0] * 6,
        probs=[1.0, 0.9, 0.5, 0.2, 0.8, 0.6],
    )


def test_prune_keeps_exactly_the_most_probable_nodes():
    trie = star_and_chain()
    for keep, tokens in [
        (0, [7]),
        (1, [7, 11]),
        (2, [7, 11, 21]),
        (3, [7, 11, 21, 31]),
        (4, [7, 11, 12, 21, 31]),
        (5, [7, 11, 12, 13, 21, 31]),
        (9, [7, 11, 12, 13, 21, 31]),
    ]:
        pruned = prune(trie, keep)
        assert len(pruned) == min(keep, 5) + 1
        assert sorted(pruned.tokens) == sorted(tokens), keep
        for node in range(1, len(pruned)):
            parent = pruned.parents[node]
            assert parent < node and pruned.children[parent][pruned.tokens[node]] == node
            assert pruned.depths[node] == pruned.depths[parent] + 1

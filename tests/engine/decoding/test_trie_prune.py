"""Pruning a draft trie keeps the root and exactly the `keep` most probable nodes, parents
before children, with the children maps rebuilt (an off-by-one here costs speed, not
exactness, so only a direct check sees it)."""

from __future__ import annotations

from swiftwriter.engine.decoding.sources import Candidate
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


def test_pruned_apart_a_kept_node_does_not_depend_on_the_other_groups_tokens():
    """The "fastest" sampler's trie (trie.build_apart): each group is pruned on its own
    estimates and merged only after, so which drafted positions stay is the same whether the
    drafter's tokens happen to equal the counting sources' or not, and merged ones share a
    node."""
    from swiftwriter.engine.decoding.trie import build_apart

    def estimate(source, depth, rank):
        return {"heads": 0.6, "ngram": 0.5}[source] / (1 + rank) ** 0.5 / depth

    counted = [Candidate("ngram", (5, 6, 7), 0), Candidate("ngram", (8,), 1)]

    def kept(drafted_tokens):
        drafted = [
            Candidate("heads", (a,), ranks=(i,)) for i, a in enumerate(drafted_tokens[:3])
        ] + [Candidate("heads", (drafted_tokens[0], b), ranks=(0, j))
             for j, b in enumerate(drafted_tokens[3:])]  # fmt: skip
        trie = build_apart(0, [drafted, counted], estimate, 8, lambda probs: 5)
        heads = sorted(
            (trie.depths[i], trie.source_ranks[i]["heads"])
            for i in range(1, len(trie))
            if "heads" in trie.sources[i]
        )
        return trie, heads

    apart, heads_apart = kept([20, 21, 22, 30, 31])
    merged, heads_merged = kept([5, 8, 22, 6, 31])  # two of them the n-gram's own tokens
    assert heads_apart == heads_merged
    assert len(merged) < len(apart)  # the same kept nodes, merged where tokens agree
    assert merged.sources[merged.children[0][5]] == ("heads", "ngram")

"""The trie's host work done in fewer operations still gives the same mask."""

from __future__ import annotations

import random

import torch
from swiftwriter.engine.decoding.sources import Candidate
from swiftwriter.engine.decoding.trie import Trie, build_trie


def naive_mask(trie: Trie) -> torch.Tensor:
    n = len(trie)
    allowed = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        node = i
        while node >= 0:
            allowed[i, node] = True
            node = trie.parents[node]
    return allowed


def random_candidates(rng: random.Random) -> list[Candidate]:
    return [
        Candidate(
            rng.choice(["ngram", "suffix", "heads"]),
            tuple(rng.randrange(6) for _ in range(rng.randrange(1, 7))),
            rng.randrange(4),
        )
        for _ in range(rng.randrange(1, 12))
    ]


def test_ancestor_mask_is_each_node_with_its_ancestors():
    rng = random.Random(0)
    for _ in range(50):
        trie = build_trie(1, random_candidates(rng), lambda s, d, r: 0.5 / (1 + r), 8)
        assert torch.equal(trie.ancestor_mask(), naive_mask(trie))

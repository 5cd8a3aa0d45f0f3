"""The token tree one verification pass reads: node 0 is the root (the newest committed token,
not yet cached), every other node a drafted token under its parent. The decoding loop builds
and prunes it (decoding/trie.py); the passes need only its shape."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class Trie:
    tokens: list[int]
    parents: list[int]
    depths: list[int]
    sources: list[tuple[str, ...]]
    ranks: list[int]
    probs: list[float]
    children: list[dict[int, int]] = field(default_factory=list)
    # per node, each proposing source's own rank there: a node that two sources propose is
    # learned under each source's rank, not under the rank of whichever estimate won
    source_ranks: list[dict[str, int]] = field(default_factory=list)

    def ranks_at(self, node: int) -> dict[str, int]:
        """{source: its rank} for a node's proposers (the node's rank for all when unknown)."""
        if self.source_ranks:
            return self.source_ranks[node]
        return dict.fromkeys(self.sources[node], self.ranks[node])

    def __len__(self) -> int:
        return len(self.tokens)

    def path_to(self, node: int) -> list[int]:
        """Tokens from the root's first child down to `node` (the root itself excluded)."""
        out = []
        while node > 0:
            out.append(self.tokens[node])
            node = self.parents[node]
        return out[::-1]

    def subtree(self, node: int, limit: int = 1 << 30) -> list[int]:
        """`node` and its descendants, breadth first, at most `limit` of them."""
        out, i = [node], 0
        while i < len(out) and len(out) < limit:
            out.extend(self.children[out[i]].values())
            i += 1
        return out[:limit]

    def ancestor_mask(self) -> torch.Tensor:
        """Bool [n, n]: entry (i, j) is True when j is i itself or one of its ancestors."""
        n = len(self.tokens)
        lines: list[list[int]] = []  # per node: its ancestors and itself (parents come first)
        rows: list[int] = []
        for i, p in enumerate(self.parents):
            line = lines[p] + [i] if p >= 0 else [i]
            lines.append(line)
            rows += [i] * len(line)
        allowed = torch.zeros(n, n, dtype=torch.bool)
        allowed[rows, [j for line in lines for j in line]] = True  # one write, not one per row
        return allowed

    def is_chain(self) -> bool:
        return all(p == i - 1 for i, p in enumerate(self.parents))

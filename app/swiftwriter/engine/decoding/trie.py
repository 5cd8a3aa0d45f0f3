"""One candidate trie per step: every source's proposals merged into a prefix trie, pruned to
the nodes most likely to be accepted, flattened for one verification pass.

Node 0 is the root: the newest committed token, not yet in the KV cache. A node's estimated
probability is the product of the conditional acceptance estimates along its path, so pruning
by it always keeps a node's ancestors."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from swiftwriter.engine.decoding.sources import Candidate
from swiftwriter.engine.passes import Trie

Estimate = Callable[
    [str, int, int], float
]  # (source, depth, rank) -> P(accepted | parent accepted)


def build_trie(
    root: int, candidates: Sequence[Candidate], estimate: Estimate, max_depth: int
) -> Trie:
    """Merge all candidates into one trie (no pruning yet); conditional estimates are max over sources."""
    tokens, parents, depths, ranks = [root], [-1], [0], [0]
    srcs: list[dict[str, tuple[float, int]]] = [{}]  # source -> (its best estimate, its rank)
    cond: list[float] = [1.0]
    children: list[dict[int, int]] = [{}]
    for cand in candidates:
        node = 0
        for depth, tok in enumerate(cand.tokens[:max_depth], start=1):
            rank = cand.rank_at(depth)
            p = estimate(cand.source, depth, rank)
            child = children[node].get(tok)
            if child is None:
                child = len(tokens)
                tokens.append(tok)
                parents.append(node)
                depths.append(depth)
                ranks.append(rank)
                srcs.append({cand.source: (p, rank)})
                cond.append(p)
                children.append({})
                children[node][tok] = child
            else:
                mine = srcs[child].get(cand.source)
                if mine is None or p > mine[0]:
                    srcs[child][cand.source] = (p, rank)
                if p > cond[child]:
                    cond[child], ranks[child] = p, rank
            node = child
    probs = [1.0] * len(tokens)
    for i in range(1, len(tokens)):  # parents are always created before their children
        probs[i] = probs[parents[i]] * cond[i]
    names = [tuple(sorted(s)) for s in srcs]
    own = [{name: rank for name, (_p, rank) in s.items()} for s in srcs]
    return Trie(tokens, parents, depths, names, ranks, probs, children, own)


def prune(trie: Trie, keep: int) -> Trie:
    """Keep the root and the `keep` most probable draft nodes (ancestors come along by construction)."""
    order = sorted(range(1, len(trie)), key=lambda i: (-trie.probs[i], trie.depths[i], i))[:keep]
    chosen = [0] + sorted(order, key=lambda i: (trie.depths[i], i))
    new_index = {old: new for new, old in enumerate(chosen)}
    parents = [-1] + [new_index[trie.parents[i]] for i in chosen[1:]]
    children: list[dict[int, int]] = [{} for _ in chosen]
    for new, old in enumerate(chosen[1:], start=1):
        children[parents[new]][trie.tokens[old]] = new
    return Trie(
        tokens=[trie.tokens[i] for i in chosen],
        parents=parents,
        depths=[trie.depths[i] for i in chosen],
        sources=[trie.sources[i] for i in chosen],
        ranks=[trie.ranks[i] for i in chosen],
        probs=[trie.probs[i] for i in chosen],
        children=children,
        source_ranks=[trie.source_ranks[i] for i in chosen] if trie.source_ranks else [],
    )


def build_apart(
    root: int,
    groups: Sequence[Sequence[Candidate]],
    estimate: Estimate,
    max_depth: int,
    size: Callable[[list[float]], int],
) -> Trie:
    """Each group's proposals merged into a trie of its own, the `size(probs)` most probable
    nodes of all kept, and only then the kept paths merged into one trie. A node's place then
    never depends on which tokens another group proposed (the "fastest" sampler needs a kept
    node independent of what a drafter drew under it, rejection.py)."""
    tries = [build_trie(root, group, estimate, max_depth) for group in groups]
    nodes = [(g, i) for g, t in enumerate(tries) for i in range(1, len(t))]
    keep = size([tries[g].probs[i] for g, i in nodes])
    # ancestors come first: a node's probability is at most its parent's, its depth greater
    nodes.sort(key=lambda n: (-tries[n[0]].probs[n[1]], tries[n[0]].depths[n[1]], n))
    kept: list[Candidate] = []
    for g, i in nodes[:keep]:
        t = tries[g]
        line = [i]
        while t.parents[line[-1]] > 0:
            line.append(t.parents[line[-1]])
        line.reverse()
        path = tuple(t.tokens[n] for n in line)
        for source in t.sources[i]:  # a path's proposer proposed every node above it
            ranks = tuple(t.ranks_at(n)[source] for n in line)
            kept.append(Candidate(source, path, ranks[-1], ranks=ranks))
    return build_trie(root, kept, estimate, max_depth)


def best_size(
    probs_desc: Sequence[float],
    cost: Callable[[int], float],
    max_nodes: int,
    margin: float = 1.03,
    rows: int = 0,
    tokens: float = 0.0,
) -> int:
    """Number of draft nodes that maximises expected tokens per step / cost of the pass.

    Expected tokens = 1 (the target's own token) + the sum of the chosen nodes' acceptance
    probabilities; cost(n) is the relative cost of verifying n tokens (root included). Drafting
    must beat plain decoding by `margin`, so estimates that only just favour it (noise) do not
    make the engine slower than plain decoding. `rows` and `tokens`: what other runs verified
    in the same pass bring to it (together.py), so a draft is priced at the pass's margin."""
    plain_rate = (tokens + 1.0) / cost(rows + 1)
    best_k, best_rate, total = 0, plain_rate * margin, tokens + 1.0
    for k, p in enumerate(probs_desc[:max_nodes], start=1):
        total += p
        rate = total / cost(rows + k + 1)
        if rate > best_rate:
            best_k, best_rate = k, rate
    return best_k

"""Candidate sources: pluggable drafters that propose token sequences to follow the context.

A source sees every committed token (`observe`) and, once per step, proposes continuations of
the committed sequence (`propose`). The trie merges all proposals; the generator learns how often
each source's nodes are accepted and sizes the trie by that."""

from __future__ import annotations

import copy
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from swiftwriter.errors import UserError

Noise = Callable[[int], torch.Tensor]  # k -> Gumbel noise [vocab] of the k-th token ahead


@dataclass
class Candidate:
    """A proposed continuation of the committed tokens, with the source's own rank (0 = best)."""

    source: str
    tokens: tuple[int, ...]
    rank: int = 0
    ranks: tuple[int, ...] | None = None  # per token (learned drafters: a confidence bin each)

    def rank_at(self, depth: int) -> int:
        return self.ranks[depth - 1] if self.ranks is not None else self.rank


class CandidateSource:
    """The drafter contract. Every source sets `name` and implements `observe` and `propose`;
    the other hooks have defaults that do nothing, so the generator calls them on every source
    without probing: `start` once per run, `set_feature` with the hidden state named by
    `wants_feature` (learned drafters), `couple` with the sampler's noise (sampling only), and
    `gated` sources are asked only while they pay."""

    name = "source"
    gated = False  # asked only while its drafts save more time than they cost (SourceGate)
    wants_feature: str | None = None  # "final" or "prenorm": the hidden state it drafts from

    def start(self, sampling, vocab_size: int, window=None) -> None:
        """A run begins with these sampling settings (SamplingSettings), vocabulary size and
        penalty window (logits.PenaltyWindow: the committed tokens, kept by the run)."""

    def set_feature(self, feature) -> None:
        """The `wants_feature` hidden state after the newest committed token."""

    def couple(self, noise) -> None:
        """Sampling only: `noise(k)` is the Gumbel noise [vocab] with which the k-th token after
        the committed text will be drawn (k = 0: the next one). A source that scores tokens
        can propose the ones its own distribution draws under the same noise (logits.Draws);
        one that counts continuations can rank them so (`coupled_order`)."""

    def sample_drafts(self, noise) -> None:
        """The "fastest" sampler (rejection.py), before each `propose`: a source that scores
        tokens draws this call's drafts from its own distribution with `noise(level, row,
        size)` (Gumbel rows no other call reads) and keeps what it drew (`drawn`); one that
        counts continuations proposes them as before, judged as point masses."""

    def drawn(self) -> dict:
        """{path below the committed text: rejection.DraftRecord} for the last `propose`
        after `sample_drafts`; empty for a source that proposes without chance."""
        return {}

    def fork(self) -> CandidateSource:
        """This source for another run going on at the same time (runs verified together):
        what it only reads shared, its run state its own. A deep copy unless a source knows
        better."""
        return copy.deepcopy(self)

    def observe(self, tokens: Sequence[int]) -> None:  # pragma: no cover - interface
        """New committed tokens (the prompt first, then each step's output)."""
        raise NotImplementedError

    def propose(
        self, context: Sequence[int], max_candidates: int
    ) -> list[Candidate]:  # pragma: no cover
        """Continuations of `context` (all committed tokens), best first."""
        raise NotImplementedError

    def footprint(self) -> dict:
        """{"entries": held, "cap": bound} in the source's own unit, for the run statistics:
        every source that keeps state per token must stay bounded over a long run."""
        return {}


def coupled_order(
    paths: Sequence[Sequence[int]], weights: Sequence[float], noise: Noise
) -> tuple[list[int], list[tuple[int, ...]]]:
    """The paths in the order in which the source's own distribution, drawn with the target's
    noise, would write them, and each path's rank among its siblings at every depth.

    The weights (counts, or probabilities) define the source's distribution at each branch:
    q(t | prefix) is the weight of the paths through prefix + t over the prefix's. Its
    Gumbel-max draw under the k-th position's noise g_k is argmax log q + g_k, the same rule
    by which the target draws its token: where q is close to the target's distribution the
    two agree (with probability at least (1 - TV) / (1 + TV)), whereas the most counted path
    agrees only as often as the target's probability of it. Siblings follow in the order of
    their scores (a draw without replacement), a branch's paths stay together, and noise is
    read only at depths where paths branch. Returns (indices of `paths`, best first; per
    path, its sibling rank at each of its depths)."""
    ranks: list[list[int]] = [[] for _ in paths]
    order: list[int] = []

    def visit(members: list[int], depth: int) -> None:
        groups: dict[int, list[int]] = {}
        for i in members:
            if len(paths[i]) > depth:
                groups.setdefault(paths[i][depth], []).append(i)
            else:
                order.append(i)  # a path that ends here (only another's prefix could)
        tokens = list(groups)
        if len(tokens) > 1:
            g = noise(depth)[torch.tensor(tokens)].tolist()
            total = [sum(weights[i] for i in groups[t]) for t in tokens]
            score = {
                t: (math.log(w) if w > 0 else -math.inf) + gt
                for t, w, gt in zip(tokens, total, g, strict=True)
            }
            tokens.sort(key=score.__getitem__, reverse=True)
        for rank, token in enumerate(tokens):
            for i in groups[token]:
                ranks[i].append(rank)
            visit(groups[token], depth + 1)

    visit(list(range(len(paths))), 0)
    return order, [tuple(r) for r in ranks]


class NGramTable:
    """TokenSwift's token reutilization table: first token -> counts of 3-token continuations.

    One Counter per key, so incrementing one continuation never disturbs another (the public
    reference code kept a sorted set compared by count only and could delete the wrong item).

    Bounded, so a very long run stays flat: a key keeps at most `max_per_key` continuations and
    the table at most `max_entries`. When either overflows, the least-counted continuations go
    (ties: the least recently added first) down to three quarters of the cap, so eviction is
    deterministic and costs O(log n) per added n-gram, amortised. Drafting reads the top 20."""

    def __init__(self, n: int = 4, max_per_key: int = 64, max_entries: int = 1 << 17):
        self.n = n
        self.table: dict[int, Counter] = {}
        self.max_per_key = max_per_key
        self.max_entries = max_entries
        self.entries = 0
        self.evicted = 0

    def add_sequence(self, tokens: Sequence[int], weight: int = 1) -> None:
        n, table = self.n, self.table
        for i in range(len(tokens) - n + 1):
            counter = table.get(tokens[i])
            if counter is None:
                counter = table[tokens[i]] = Counter()
            cont = tuple(tokens[i + 1 : i + n])
            if cont not in counter:
                if len(counter) >= self.max_per_key:
                    self._shrink_key(counter)
                self.entries += 1
            counter[cont] += weight
        if self.entries > self.max_entries:
            self._shrink_table()

    def _shrink_key(self, counter: Counter) -> None:
        keep = max(1, self.max_per_key * 3 // 4)
        items = list(counter.items())  # insertion order: oldest first
        order = sorted(range(len(items)), key=lambda i: (-items[i][1], -i))[:keep]
        counter.clear()
        for i in sorted(order):
            counter[items[i][0]] = items[i][1]
        self.evicted += len(items) - keep
        self.entries -= len(items) - keep

    def _shrink_table(self) -> None:
        target = self.max_entries * 3 // 4
        ranked = [
            (count, k, j)
            for k, (key, counter) in enumerate(self.table.items())
            for j, count in enumerate(counter.values())
        ]
        ranked.sort()  # least counted first; ties: earlier keys, older continuations
        drop: dict[int, set[int]] = {}
        for _count, k, j in ranked[: self.entries - target]:
            drop.setdefault(k, set()).add(j)
        for k, key in enumerate(list(self.table)):
            gone = drop.get(k)
            if not gone:
                continue
            counter = self.table[key]
            kept = [(c, v) for j, (c, v) in enumerate(counter.items()) if j not in gone]
            if kept:
                self.table[key] = Counter(dict(kept))
            else:
                del self.table[key]
        self.evicted += self.entries - target
        self.entries = target

    def top(self, key: int, k: int) -> list[tuple[tuple[int, ...], int]]:
        counter = self.table.get(key)
        return counter.most_common(k) if counter else []

    def __len__(self) -> int:
        return self.entries


class CoupledRanking:
    """For counting sources: the run's noise while sampling (`couple`), forgotten when a run
    starts, so a greedy run never ranks by an earlier run's noise."""

    noise: Noise | None = None

    def start(self, sampling, vocab_size: int, window=None) -> None:
        self.noise = None

    def couple(self, noise: Noise) -> None:
        self.noise = noise


class NGramSource(CoupledRanking, CandidateSource):
    """4-gram reuse over prompt and output, queried with the newest committed token. Greedy,
    the most counted continuations first; sampling under the shared noise, in the order the
    table's counts draw them with the target's noise (`coupled_order`), each token ranked
    among its siblings, so the acceptance estimates learn what the coupled draw is worth."""

    name = "ngram"

    def __init__(
        self, n: int = 4, branches: int = 20, max_per_key: int = 64, max_entries: int = 1 << 17
    ):
        self.table = NGramTable(n, max_per_key, max_entries)
        self.branches = branches
        self._tail: list[int] = []  # the last n-1 tokens, to count n-grams across observe() calls

    def observe(self, tokens: Sequence[int]) -> None:
        seq = self._tail + list(tokens)
        self.table.add_sequence(seq)
        self._tail = seq[-(self.table.n - 1) :]

    def propose(self, context: Sequence[int], max_candidates: int) -> list[Candidate]:
        if not context:
            return []
        top = self.table.top(context[-1], min(self.branches, max_candidates))
        if self.noise is None or len(top) < 2:
            return [Candidate(self.name, cont, rank) for rank, (cont, _count) in enumerate(top)]
        conts = [cont for cont, _ in top]
        order, ranks = coupled_order(conts, [count for _, count in top], self.noise)
        return [
            Candidate(self.name, conts[i], rank, ranks=ranks[i]) for rank, i in enumerate(order)
        ]

    def footprint(self) -> dict:
        return {"entries": len(self.table), "cap": self.table.max_entries}


class SuffixMatchSource(CoupledRanking, CandidateSource):
    """Prompt-lookup style: find where the context's last few tokens occurred before and propose
    what followed there (longest match first, most recent occurrence first; sampling under the
    shared noise, the occurrences of one match length in the order their continuations'
    counts draw them with the target's noise, `coupled_order`)."""

    name = "suffix"

    def __init__(
        self,
        max_len: int = 24,
        match_lengths: Sequence[int] = (6, 4, 3, 2),
        max_positions: int = 8,
        max_tokens: int = 1 << 15,
    ):
        self.max_len = max_len
        self.max_tokens = max_tokens  # only the most recent text is searched (bounded memory)
        self.match_lengths = tuple(sorted(match_lengths, reverse=True))
        self.max_positions = max_positions
        self.tokens: list[int] = []
        self.index: dict[int, dict[tuple[int, ...], list[int]]] = {
            m: {} for m in self.match_lengths
        }

    def observe(self, tokens: Sequence[int]) -> None:
        start = len(self.tokens)
        self.tokens.extend(tokens)
        if len(self.tokens) > self.max_tokens:
            # Keep the newest three quarters and index them afresh: amortised O(1) per token.
            self.tokens = self.tokens[-(self.max_tokens * 3 // 4) :]
            self.index = {m: {} for m in self.match_lengths}
            start = 0
        for m, idx in self.index.items():
            for end in range(max(start, m), len(self.tokens) + 1):
                key = tuple(self.tokens[end - m : end])
                positions = idx.setdefault(key, [])
                positions.append(end)
                if len(positions) > self.max_positions:
                    del positions[0]

    def propose(self, context: Sequence[int], max_candidates: int) -> list[Candidate]:
        toks = self.tokens
        found: list[list[tuple[int, ...]]] = []  # per match length, longest first
        seen: set[tuple[int, ...]] = set()
        for m in self.match_lengths:
            if len(context) < m or len(seen) >= max_candidates:
                continue
            found.append([])
            for end in reversed(self.index[m].get(tuple(context[-m:]), [])):
                if end >= len(toks):  # the suffix itself
                    continue
                cont = self._copy(end)
                if cont and cont not in seen:
                    seen.add(cont)
                    found[-1].append(cont)
                if len(seen) >= max_candidates:
                    break
        out: list[Candidate] = []
        for conts in found:
            if self.noise is not None and len(conts) > 1:
                order, _ = coupled_order(conts, [1.0] * len(conts), self.noise)
                conts = [conts[i] for i in order]
            out += [Candidate(self.name, cont, len(out) + i) for i, cont in enumerate(conts)]
        return out

    def _copy(self, end: int) -> tuple[int, ...]:
        """What followed `end`, `max_len` tokens long. A match close to the end of the text runs
        out of text: the copy then goes on over its own output (as an LZ77 copy overlaps), so
        a text caught in a loop of a few tokens is drafted a whole `max_len` ahead instead of
        one period, which left a pass drafting five tokens where twenty would have held."""
        toks = self.tokens
        out = list(toks[end : end + self.max_len])
        period = len(toks) - end
        while out and len(out) < self.max_len:
            out.append(out[len(out) - period])
        return tuple(out)

    def footprint(self) -> dict:
        return {"entries": len(self.tokens), "cap": self.max_tokens}


def build_sources(
    names: Sequence[str], ngram_branches: int = 20, suffix_max_len: int = 24
) -> list[CandidateSource]:
    sources: list[CandidateSource] = []
    for name in names:
        if name == "ngram":
            sources.append(NGramSource(branches=ngram_branches))
        elif name == "suffix":
            sources.append(SuffixMatchSource(max_len=suffix_max_len))
        elif name == "heads":
            continue  # a learned drafter: the generator adds it when one is loaded
        else:
            raise UserError(f"Unknown draft source '{name}' (known: heads, ngram, suffix)")
    return sources

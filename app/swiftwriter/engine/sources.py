"""Candidate sources: pluggable drafters that propose token sequences to follow the context.

A source sees every committed token (`observe`) and, once per step, proposes continuations of
the committed sequence (`propose`). The trie merges all proposals; the generator learns how often
each source's nodes are accepted and sizes the trie by that."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class Candidate:
    """A proposed continuation of the committed tokens, with the source's own rank (0 = best)."""

    source: str
    tokens: tuple[int, ...]
    rank: int = 0


class CandidateSource:
    """Interface of a drafter. Subclasses set `name` and implement the two methods."""

    name = "source"

    def observe(self, tokens: Sequence[int]) -> None:  # pragma: no cover - interface
        """New committed tokens (the prompt first, then each step's output)."""
        raise NotImplementedError

    def propose(
        self, context: Sequence[int], max_candidates: int
    ) -> list[Candidate]:  # pragma: no cover
        """Continuations of `context` (all committed tokens), best first."""
        raise NotImplementedError


class NGramTable:
    """TokenSwift's token reutilization table: first token -> counts of 3-token continuations.

    One Counter per key, so incrementing one continuation never disturbs another (the public
    reference code kept a sorted set compared by count only and could delete the wrong item)."""

    def __init__(self, n: int = 4, max_keys: int | None = None):
        self.n = n
        self.table: dict[int, Counter] = defaultdict(Counter)
        self.max_keys = max_keys

    def add_sequence(self, tokens: Sequence[int], weight: int = 1) -> None:
        n = self.n
        for i in range(len(tokens) - n + 1):
            self.table[tokens[i]][tuple(tokens[i + 1 : i + n])] += weight

    def top(self, key: int, k: int) -> list[tuple[tuple[int, ...], int]]:
        counter = self.table.get(key)
        return counter.most_common(k) if counter else []

    def __len__(self) -> int:
        return sum(len(c) for c in self.table.values())


class NGramSource(CandidateSource):
    """4-gram reuse over prompt and output, queried with the newest committed token."""

    name = "ngram"

    def __init__(self, n: int = 4, branches: int = 20):
        self.table = NGramTable(n)
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
        return [Candidate(self.name, cont, rank) for rank, (cont, _count) in enumerate(top)]


class SuffixMatchSource(CandidateSource):
    """Prompt-lookup style: find where the context's last few tokens occurred before and propose
    what followed there (longest match first, most recent occurrence first)."""

    name = "suffix"

    def __init__(
        self, max_len: int = 24, match_lengths: Sequence[int] = (6, 4, 3, 2), max_positions: int = 8
    ):
        self.max_len = max_len
        self.match_lengths = tuple(sorted(match_lengths, reverse=True))
        self.max_positions = max_positions
        self.tokens: list[int] = []
        self.index: dict[int, dict[tuple[int, ...], list[int]]] = {
            m: {} for m in self.match_lengths
        }

    def observe(self, tokens: Sequence[int]) -> None:
        start = len(self.tokens)
        self.tokens.extend(tokens)
        for m, idx in self.index.items():
            for end in range(max(start, m), len(self.tokens) + 1):
                key = tuple(self.tokens[end - m : end])
                positions = idx.setdefault(key, [])
                positions.append(end)
                if len(positions) > self.max_positions:
                    del positions[0]

    def propose(self, context: Sequence[int], max_candidates: int) -> list[Candidate]:
        toks = self.tokens
        out: list[Candidate] = []
        seen: set[tuple[int, ...]] = set()
        for m in self.match_lengths:
            if len(context) < m:
                continue
            for end in reversed(self.index[m].get(tuple(context[-m:]), [])):
                if end >= len(toks):  # the suffix itself
                    continue
                cont = tuple(toks[end : end + self.max_len])
                if cont and cont not in seen:
                    seen.add(cont)
                    out.append(Candidate(self.name, cont, len(out)))
                if len(out) >= max_candidates:
                    return out
        return out


def build_sources(
    names: Sequence[str], ngram_branches: int = 20, suffix_max_len: int = 24
) -> list[CandidateSource]:
    sources: list[CandidateSource] = []
    for name in names:
        if name == "ngram":
            sources.append(NGramSource(branches=ngram_branches))
        elif name == "suffix":
            sources.append(SuffixMatchSource(max_len=suffix_max_len))
        else:
            from swiftwriter.errors import UserError

            raise UserError(f"Unknown draft source '{name}' (known: ngram, suffix)")
    return sources

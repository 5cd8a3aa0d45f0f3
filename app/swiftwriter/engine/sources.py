"""Candidate sources: pluggable drafters that propose token sequences to follow the context.

A source sees every committed token (`observe`) and, once per step, proposes continuations of
the committed sequence (`propose`). The trie merges all proposals; the generator learns how often
each source's nodes are accepted and sizes the trie by that."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass


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
        can propose the ones its own distribution draws under the same noise (logits.Draws)."""

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


class NGramSource(CandidateSource):
    """4-gram reuse over prompt and output, queried with the newest committed token."""

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
        return [Candidate(self.name, cont, rank) for rank, (cont, _count) in enumerate(top)]

    def footprint(self) -> dict:
        return {"entries": len(self.table), "cap": self.table.max_entries}


class SuffixMatchSource(CandidateSource):
    """Prompt-lookup style: find where the context's last few tokens occurred before and propose
    what followed there (longest match first, most recent occurrence first)."""

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
        out: list[Candidate] = []
        seen: set[tuple[int, ...]] = set()
        for m in self.match_lengths:
            if len(context) < m:
                continue
            for end in reversed(self.index[m].get(tuple(context[-m:]), [])):
                if end >= len(toks):  # the suffix itself
                    continue
                cont = self._copy(end)
                if cont and cont not in seen:
                    seen.add(cont)
                    out.append(Candidate(self.name, cont, len(out)))
                if len(out) >= max_candidates:
                    return out
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
            from swiftwriter.errors import UserError

            raise UserError(f"Unknown draft source '{name}' (known: heads, ngram, suffix)")
    return sources

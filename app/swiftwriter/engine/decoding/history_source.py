"""Drafts from a project's history: earlier generations, documents and notes.

llama.cpp keeps three n-gram tiers (context, dynamic, static) with fixed n; SuffixDecoding keeps
suffix trees over earlier outputs and grows a speculation tree from the longest match. Here the
history is one token corpus with a suffix array over *reversed* prefixes truncated to `depth`
tokens: the occurrences of the context's last m tokens form one range, and the ranges for
m = 1, 2, ... nest, so the longest match of any length up to `depth` is found by narrowing with
binary search. What followed the matches is counted into a small tree, and the most probable
nodes become candidates (SuffixDecoding's greedy expansion, length capped by the match length).

Updates never rebuild from scratch: new or changed sequences go to a small delta tier that is
re-sorted alone, merged into the static tier when it grows past a fraction of it (amortised
O(log n) sorts per token, like an LSM tree). A changed document is diffed against its earlier
tokens, so appending a generation to a chapter only indexes the new tail. The whole index
serialises to a few byte blobs the project store keeps per tokenizer.

`HistorySource` is weighted below the current context: it proposes only where the history
knows a longer match than the context itself (otherwise the context's own n-gram and suffix
sources speak), and ranks short matches lower so the engine learns their reliability apart."""

from __future__ import annotations

import heapq
import json
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from swiftwriter.engine.decoding.sources import (
    Candidate,
    CandidateSource,
    CoupledRanking,
    coupled_order,
)

SENT = 0xFFFFFFFF  # separates sequences; never a token
FORMAT = 1
MAX_DEPTH = 64  # longer keys (and continuations) never pay: a cache saying more is damaged


def _u32(data: bytes) -> array:
    arr = array("I")
    arr.frombytes(data)
    if sys.byteorder == "big":  # pragma: no cover
        arr.byteswap()
    return arr


def _bytes(arr: array) -> bytes:
    if sys.byteorder == "big":  # pragma: no cover
        arr = array("I", arr)
        arr.byteswap()
    return arr.tobytes()


def build_suffix_array(corpus: np.ndarray, lo: int, hi: int, depth: int, alive: np.ndarray):
    """Alive positions in [lo, hi), sorted by (c[p], c[p-1], ..., c[p-depth+1]).

    Prefix doubling on dense ranks: log2(depth) sorts of n pairs. Needs lo >= depth - 1."""
    w0 = lo - (depth - 1)
    _, rank = np.unique(corpus[w0:hi], return_inverse=True)
    rank = rank.astype(np.int64).ravel()
    k = 1
    while k < depth:
        shifted = np.zeros_like(rank)
        shifted[k:] = rank[:-k] + 1
        _, rank = np.unique(rank * (rank.max() + 2) + shifted, return_inverse=True)
        rank = rank.astype(np.int64).ravel()
        k *= 2
    positions = np.arange(lo, hi, dtype=np.int64)[alive[lo:hi]]
    order = np.argsort(rank[positions - w0], kind="stable")
    return positions[order].astype(np.uint32)


class HistoryIndex:
    """Token sequences under keys (with a fingerprint each), searchable by longest match."""

    def __init__(
        self,
        depth: int = 16,
        cont_len: int = 16,
        min_merge: int = 1 << 16,
        merge_ratio: float = 0.125,
    ):
        self.depth = depth
        self.cont_len = cont_len
        self.min_merge = min_merge
        self.merge_ratio = merge_ratio
        self.corpus = array("I", [SENT] * depth)
        self.static_end = depth
        self.static_sa = array("I")
        self.delta_sa = array("I")
        self.dead: list[list[int]] = []  # [start, end) ranges no longer part of any sequence
        self.sources: dict[str, dict] = {}  # key -> {"fp": fingerprint, "pieces": [[start, n]]}
        self.alive_tokens = 0
        self.dirty: set[str] = {"meta", "corpus.static", "sa.static", "corpus.delta", "sa.delta"}
        self._delta_stale = False
        self._views: dict[str, np.ndarray] = {}
        self._anon = 0

    # -- content ----------------------------------------------------------------------------
    def fingerprints(self) -> dict[str, str]:
        return {key: src["fp"] for key, src in self.sources.items()}

    def __len__(self) -> int:
        return self.alive_tokens

    def add(self, tokens: Sequence[int]) -> None:
        """An anonymous sequence (for callers without keys, e.g. tests and benchmarks)."""
        self._anon += 1
        self.update(f"anon{self._anon}", "", tokens)

    def update(
        self, key: str, fingerprint: str, tokens: Sequence[int], settle: bool = True
    ) -> None:
        """Set the tokens under `key`. Only what differs from its earlier tokens (after their
        common prefix) is indexed again; the replaced positions are marked dead. Many updates
        in a row pass `settle=False` and call `settle()` once at the end."""
        old = self.sources.get(key)
        if old is not None and old["fp"] == fingerprint and fingerprint:
            return
        tokens = [int(t) for t in tokens]
        if any(t < 0 or t >= SENT for t in tokens):
            raise ValueError("token ids must be in [0, 2**32 - 1)")
        if old is None and not tokens:
            return
        old_tokens = self.tokens_of(key) if old is not None else []
        common = _common_prefix(old_tokens, tokens)
        keep = max(0, common - self.cont_len)  # re-index the last few: their continuations grow
        pieces = self._truncate(old["pieces"], keep) if old is not None else []
        if old is not None:
            self._kill(old["pieces"], keep)
            self.alive_tokens -= len(old_tokens) - keep
        if len(tokens) > keep:
            context_start = max(0, keep - (self.depth - 1))
            start = len(self.corpus)
            self._views.pop("corpus", None)  # a live numpy view would pin the array's size
            self.corpus.extend(tokens[context_start:])
            self.corpus.append(SENT)
            if keep > context_start:  # look-back context for the keys, not indexed itself
                self.dead.append([start, start + keep - context_start])
            pieces.append([start + keep - context_start, len(tokens) - keep])
            self.alive_tokens += len(tokens) - keep
        self.sources[key] = {"fp": fingerprint, "pieces": pieces}
        self._changed(settle)

    def discard(self, key: str, settle: bool = True) -> None:
        old = self.sources.pop(key, None)
        if old is not None:
            self._kill(old["pieces"], 0)
            self.alive_tokens -= sum(n for _, n in old["pieces"])
            self._changed(settle)

    def tokens_of(self, key: str) -> list[int]:
        out: list[int] = []
        for start, n in self.sources[key]["pieces"]:
            out.extend(self.corpus[start : start + n])
        return out

    # -- lookup -----------------------------------------------------------------------------
    def continuations(
        self,
        context: Sequence[int],
        min_match: int = 2,
        max_occurrences: int = 64,
        max_nodes: int = 24,
        min_prob: float = 0.05,
        length_per_match: int = 2,
    ) -> tuple[int, list[tuple[tuple[int, ...], float]]]:
        """(match length, [(continuation, empirical probability), ...] best first).

        Backs off to shorter matches while the longest ones were never followed by anything
        (the end of a sequence). The most recent occurrences win when there are many."""
        if not context or self.alive_tokens == 0:
            return 0, []
        self._refresh_delta()
        pattern = [int(t) for t in context[-1 : -self.depth - 1 : -1]]
        tiers = [
            (name, self._ranges(sa, pattern))
            for name, sa in (("sa.static", self.static_sa), ("sa.delta", self.delta_sa))
            if len(sa) > 0
        ]
        deepest = max((len(r) for _, r in tiers), default=0)
        corpus = self._view("corpus")
        alive = self._alive()
        for m in range(deepest, min_match - 1, -1):
            found = [
                self._view(name)[ranges[m - 1][0] : ranges[m - 1][1]]
                for name, ranges in tiers
                if len(ranges) >= m
            ]
            occ = np.concatenate(found).astype(np.int64)
            occ = occ[alive[occ]]
            occ = occ[corpus[np.minimum(occ + 1, len(corpus) - 1)] != SENT]
            if len(occ) == 0:
                continue
            if len(occ) > max_occurrences:
                occ = np.partition(occ, len(occ) - max_occurrences)[-max_occurrences:]
            length = min(self.cont_len, max(2, length_per_match * m))
            idx = np.minimum(occ[:, None] + np.arange(1, length + 1), len(corpus) - 1)
            return m, _expand(corpus[idx].tolist(), max_nodes, min_prob)
        return 0, []

    def _ranges(self, sa: array, pattern: list[int]) -> list[tuple[int, int]]:
        """SA ranges whose keys start with pattern[:1], pattern[:2], ... (nested)."""
        corpus = self.corpus
        lo, hi = 0, len(sa)
        out = []
        for j, value in enumerate(pattern):

            def key(p, j=j):
                return corpus[p - j]

            lo = bisect_left(sa, value, lo, hi, key=key)
            hi = bisect_right(sa, value, lo, hi, key=key)
            if lo >= hi:
                break
            out.append((lo, hi))
        return out

    # -- tiers ------------------------------------------------------------------------------
    def _changed(self, settle: bool) -> None:
        self._delta_stale = True
        self._views.pop("alive", None)
        self.dirty.update({"meta", "corpus.delta", "sa.delta"})
        if settle:
            self.settle()

    def settle(self) -> None:
        """Merge or compact when the delta tier or the dead share has grown too large."""
        dead = len(self.corpus) - self.alive_tokens
        if dead > max(self.min_merge, self.alive_tokens):
            self.compact()
        elif len(self.corpus) - self.static_end > max(
            self.min_merge, self.merge_ratio * self.static_end
        ):
            self._merge()

    def _refresh_delta(self) -> None:
        if self._delta_stale:
            n = len(self.corpus)
            self.delta_sa = array("I")
            if n > self.static_end:
                sa = build_suffix_array(
                    self._view("corpus"), self.static_end, n, self.depth, self._alive()
                )
                self.delta_sa = _u32(sa.astype("<u4").tobytes())
            self._views.pop("sa.delta", None)
            self._delta_stale = False

    def _merge(self) -> None:
        """Fold the delta tier into the static one (one sort of everything)."""
        n = len(self.corpus)
        sa = build_suffix_array(self._view("corpus"), self.depth, n, self.depth, self._alive())
        self.static_sa = _u32(sa.astype("<u4").tobytes())
        self.static_end = n
        self.delta_sa = array("I")
        self._delta_stale = False
        self._views.pop("sa.static", None)
        self._views.pop("sa.delta", None)
        self.dirty.update({"corpus.static", "sa.static"})

    def compact(self) -> None:
        """Rewrite the corpus with live sequences only, then sort it once."""
        corpus = array("I", [SENT] * self.depth)
        for src in self.sources.values():
            tokens = [t for start, n in src["pieces"] for t in self.corpus[start : start + n]]
            src["pieces"] = [[len(corpus), len(tokens)]] if tokens else []
            corpus.extend(tokens)
            corpus.append(SENT)
        self._views.clear()
        self.corpus, self.dead = corpus, []
        self._merge()
        self.dirty.add("meta")

    def _alive(self) -> np.ndarray:
        view = self._views.get("alive")
        if view is None or len(view) != len(self.corpus):
            view = self._view("corpus") != SENT
            view[: self.depth] = False
            for start, end in self.dead:
                view[start:end] = False
            self._views["alive"] = view
        return view

    def _view(self, name: str) -> np.ndarray:
        view = self._views.get(name)
        if view is None:
            source = {"corpus": self.corpus, "sa.static": self.static_sa, "sa.delta": self.delta_sa}
            view = (
                np.frombuffer(source[name], dtype=np.uint32)
                if len(source[name])
                else np.zeros(0, np.uint32)
            )
            self._views[name] = view
        return view

    def _kill(self, pieces: list[list[int]], keep: int) -> None:
        """Mark the positions of a sequence from its `keep`-th token on as dead."""
        seen = 0
        for start, n in pieces:
            cut = max(0, keep - seen)
            if cut < n:
                self.dead.append([start + cut, start + n])
            seen += n
        self._views.pop("alive", None)

    @staticmethod
    def _truncate(pieces: list[list[int]], keep: int) -> list[list[int]]:
        out, seen = [], 0
        for start, n in pieces:
            if seen >= keep:
                break
            take = min(n, keep - seen)
            out.append([start, take])
            seen += take
        return out

    # -- persistence ------------------------------------------------------------------------
    def to_parts(self, only_dirty: bool = True) -> dict[str, bytes]:
        """Blobs to store; by default only those changed since the last call."""
        self._refresh_delta()
        names = (
            set(self.dirty)
            if only_dirty
            else {"meta", "corpus.static", "sa.static", "corpus.delta", "sa.delta"}
        )
        self.dirty.clear()
        out = {}
        for name in names:
            if name == "meta":
                out[name] = json.dumps(self._meta()).encode("utf-8")
            elif name == "corpus.static":
                out[name] = _bytes(self.corpus[: self.static_end])
            elif name == "corpus.delta":
                out[name] = _bytes(self.corpus[self.static_end :])
            elif name == "sa.static":
                out[name] = _bytes(self.static_sa)
            elif name == "sa.delta":
                out[name] = _bytes(self.delta_sa)
        return out

    def _meta(self) -> dict:
        return {
            "format": FORMAT,
            "depth": self.depth,
            "cont_len": self.cont_len,
            "static_end": self.static_end,
            "corpus_len": len(self.corpus),
            "alive_tokens": self.alive_tokens,
            "dead": self.dead,
            "sources": self.sources,
        }

    @classmethod
    def from_parts(
        cls, parts: dict[str, bytes], vocab_size: int | None = None, **kwargs
    ) -> HistoryIndex | None:
        """Rebuild from stored blobs; None when they are missing, of another format or do not
        hold together (the caller then builds afresh: a cache is never trusted blindly)."""
        return cls.restore(parts, vocab_size, **kwargs)[0]

    @classmethod
    def restore(
        cls, parts: dict[str, bytes], vocab_size: int | None = None, **kwargs
    ) -> tuple[HistoryIndex | None, str]:
        """(the index the blobs hold, "") or (None, what is wrong with them: "" for another
        format). Every number in them is checked (type and range, token ids below
        `vocab_size`, positions inside the corpus) before anything is allocated by it."""
        try:
            meta = json.loads(parts["meta"].decode("utf-8"))
            corpus = _u32(parts["corpus.static"])
            static_n = len(corpus)
            corpus.extend(_u32(parts["corpus.delta"]))
            static_sa, delta_sa = _u32(parts["sa.static"]), _u32(parts["sa.delta"])
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            return None, f"unreadable parts ({type(exc).__name__})"
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            return None, ""
        wrong = _meta_problem(meta, len(corpus), static_n) or _arrays_problem(
            meta, corpus, static_sa, delta_sa, vocab_size
        )
        if wrong:
            return None, wrong
        index = cls(depth=meta["depth"], cont_len=meta["cont_len"], **kwargs)
        index.corpus, index.static_end = corpus, meta["static_end"]
        index.static_sa, index.delta_sa = static_sa, delta_sa
        index.dead = meta["dead"]
        index.sources = meta["sources"]
        index.alive_tokens = meta["alive_tokens"]
        index.dirty.clear()
        return index, ""

    def set_aside(self, key: str, fingerprint: str, settle: bool = True) -> None:
        """Keep `key` at `fingerprint` with no tokens: what it holds cannot draft (ids beyond
        the vocabulary), and it is not read again until it changes."""
        self.discard(key, settle=False)
        self.sources[key] = {"fp": fingerprint, "pieces": []}
        self._changed(settle)


def _whole(value, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _meta_problem(meta: dict, n: int, static_n: int) -> str:
    """What is wrong with a stored index's description of itself ("" when nothing): `n` and
    `static_n` are the tokens its corpus holds, in all and in the static tier."""
    for name in ("depth", "cont_len"):
        if not _whole(meta.get(name), 1, MAX_DEPTH):
            return f"{name} {meta.get(name)!r} is not a whole number from 1 to {MAX_DEPTH}"
    depth = meta["depth"]
    if not _whole(meta.get("corpus_len"), n, n):
        return f"corpus_len {meta.get('corpus_len')!r} is not the corpus's {n} tokens"
    if not _whole(meta.get("static_end"), depth, n) or meta["static_end"] != static_n:
        return f"static_end {meta.get('static_end')!r} is not the static tier's {static_n} tokens"
    if not _whole(meta.get("alive_tokens"), 0, n):
        return f"alive_tokens {meta.get('alive_tokens')!r} is not a whole number from 0 to {n}"
    dead, sources = meta.get("dead"), meta.get("sources")
    if not isinstance(dead, list) or not all(_span(r, 0, n) for r in dead):
        return "a dead range is not two positions inside the corpus"
    if not isinstance(sources, dict) or not all(_source(s, depth, n) for s in sources.values()):
        return "a source is not a fingerprint and pieces inside the corpus"
    alive = sum(count for src in sources.values() for _, count in src["pieces"])
    if alive != meta["alive_tokens"]:
        return f"alive_tokens {meta['alive_tokens']} is not its sources' {alive} tokens"
    return ""


def _span(pair, low: int, high: int) -> bool:
    return (
        isinstance(pair, list) and len(pair) == 2 and _whole(pair[0], low, high)
        and _whole(pair[1], pair[0], high)
    )  # fmt: skip


def _source(src, depth: int, n: int) -> bool:
    if not isinstance(src, dict) or not isinstance(src.get("fp"), str):
        return False
    pieces = src.get("pieces")
    return isinstance(pieces, list) and all(
        isinstance(p, list) and len(p) == 2 and _whole(p[0], depth, n) and _whole(p[1], 0, n - p[0])
        for p in pieces
    )


def _arrays_problem(meta: dict, corpus: array, static_sa: array, delta_sa: array, vocab) -> str:
    """What is wrong with a stored corpus and its suffix arrays ("" when nothing): its head of
    separators, token ids beyond the vocabulary, positions outside their tier."""
    depth, static_end, n = meta["depth"], meta["static_end"], len(corpus)
    view = np.frombuffer(corpus, dtype=np.uint32) if n else np.zeros(0, np.uint32)
    if n < depth or not (view[:depth] == SENT).all():
        return "the corpus does not open with its separators"
    if vocab is not None:
        beyond = view[(view >= vocab) & (view != SENT)]
        if len(beyond):
            return f"token id {int(beyond[0])} is beyond the vocabulary of {vocab}"
    for name, sa, low, high in (
        ("sa.static", static_sa, depth, static_end),
        ("sa.delta", delta_sa, static_end, n),
    ):
        positions = np.frombuffer(sa, dtype=np.uint32) if len(sa) else None
        if positions is not None and not (
            len(sa) <= high - low and low <= positions.min() and positions.max() < high
        ):
            return f"{name} points outside its part of the corpus"
    return ""


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(np.asarray(a[:n], dtype=np.int64) != np.asarray(b[:n], dtype=np.int64))
    return int(diff[0]) if len(diff) else n


def _expand(rows: list[list[int]], max_nodes: int, min_prob: float):
    """Count the continuations into a tree and keep its most probable nodes (a node's
    probability is the share of occurrences that continue through it); returns the kept
    subtree's root-to-leaf paths, most probable first."""
    children: list[dict[int, int]] = [{}]
    counts = [len(rows)]
    tokens = [-1]
    parents = [-1]
    for row in rows:
        node = 0
        for tok in row:
            if tok == SENT:
                break
            child = children[node].get(tok)
            if child is None:
                child = len(tokens)
                children[node][tok] = child
                children.append({})
                counts.append(0)
                tokens.append(tok)
                parents.append(node)
            counts[child] += 1
            node = child
    total = float(len(rows))
    heap = [(-counts[c] / total, c) for c in children[0].values()]
    heapq.heapify(heap)
    chosen: list[int] = []
    chosen_set: set[int] = set()
    while heap and len(chosen) < max_nodes:
        neg, node = heapq.heappop(heap)
        if -neg < min_prob:
            break
        chosen.append(node)
        chosen_set.add(node)
        for c in children[node].values():
            heapq.heappush(heap, (-counts[c] / total, c))
    leaves = [n for n in chosen if not any(c in chosen_set for c in children[n].values())]
    out = []
    for leaf in leaves:
        path, node = [], leaf
        while node > 0:
            path.append(tokens[node])
            node = parents[node]
        out.append((tuple(reversed(path)), counts[leaf] / total))
    out.sort(key=lambda item: -item[1])
    return out


class HistorySource(CoupledRanking, CandidateSource):
    """Candidates from a HistoryIndex, proposed only where the history knows more than the
    context does (the context's own sources keep the lead). Sampling under the shared noise,
    in the order the history's own frequencies draw them with the target's noise
    (`coupled_order`) rather than most frequent first."""

    name = "history"

    def __init__(
        self,
        index: HistoryIndex | None = None,
        sequences: Iterable[Sequence[int]] = (),
        min_match: int = 2,
        max_occurrences: int = 64,
        max_nodes: int = 24,
        min_prob: float = 0.05,
        defer_to_context: bool = True,
        ladder: Sequence[int] = (2, 3, 4, 6, 8, 12, 16),
        max_context: int = 1 << 16,
    ):
        self.index = index if index is not None else HistoryIndex()
        for seq in sequences:
            self.index.add(seq)
        self.min_match = min_match
        self.max_occurrences = max_occurrences
        self.max_nodes = max_nodes
        self.min_prob = min_prob
        self.defer_to_context = defer_to_context
        self.ladder = tuple(sorted(ladder))
        self.max_context = max_context  # context n-grams remembered (bounded memory)
        self._context: list[int] = []
        self._seen: dict[int, Counter] = {k: Counter() for k in self.ladder}
        self.deferred = 0  # steps where the context knew as much (for statistics and tests)
        self.proposed = 0

    def fork(self) -> HistorySource:
        """The same history (read only) with a context of its own."""
        return HistorySource(
            self.index, (), self.min_match, self.max_occurrences, self.max_nodes,
            self.min_prob, self.defer_to_context, self.ladder, self.max_context,
        )  # fmt: skip

    def observe(self, tokens: Sequence[int]) -> None:
        ctx = self._context
        start = len(ctx)
        ctx.extend(int(t) for t in tokens)
        for k, seen in self._seen.items():
            for end in range(max(start + 1, k), len(ctx) + 1):
                seen[hash(tuple(ctx[end - k : end]))] += 1
        if len(ctx) > self.max_context:
            self._forget(len(ctx) - self.max_context * 3 // 4)

    def _forget(self, n: int) -> None:
        """Drop the oldest n context tokens and the n-grams that start among them."""
        ctx = self._context
        for k, seen in self._seen.items():
            for end in range(k, min(n + k, len(ctx) + 1)):
                h = hash(tuple(ctx[end - k : end]))
                seen[h] -= 1
                if seen[h] <= 0:
                    del seen[h]
        del ctx[:n]

    def footprint(self) -> dict:
        return {"entries": len(self._context), "cap": self.max_context}

    def context_match(self, context: Sequence[int]) -> int:
        """Longest ladder length whose last k tokens also occurred earlier in the context."""
        best = 0
        for k in self.ladder:
            if len(context) < k or self._seen[k][hash(tuple(context[-k:]))] < 2:
                break
            best = k
        return best

    def propose(self, context: Sequence[int], max_candidates: int) -> list[Candidate]:
        if len(context) < self.min_match or len(self.index) == 0:
            return []
        m, conts = self.index.continuations(
            context, self.min_match, self.max_occurrences, self.max_nodes, self.min_prob
        )
        if m < self.min_match or not conts:
            return []
        floor = max((k for k in self.ladder if k <= m), default=0)  # compare on the ladder
        if self.defer_to_context and self.context_match(context) >= floor:
            self.deferred += 1
            return []
        self.proposed += 1
        penalty = 0 if m >= 8 else 1 if m >= 4 else 2  # short matches: their own estimate
        conts = conts[:max_candidates]
        if self.noise is not None and len(conts) > 1:
            order, _ = coupled_order([t for t, _ in conts], [p for _, p in conts], self.noise)
            conts = [conts[i] for i in order]
        return [
            Candidate(self.name, tokens, rank + penalty) for rank, (tokens, _p) in enumerate(conts)
        ]

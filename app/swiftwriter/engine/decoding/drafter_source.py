"""A learned drafter as a candidate source: it reads the target's hidden state at the last
accepted node (fused with verification: no extra pass), drafts a small tree, and hands it to the
trie like any other source.

Drafts are scored with the same contextual penalty as the target (over the committed window),
because the penalty changes the target's top choice at about half of all positions; a drafter
that ignored it would chase tokens the penalty forbids. Each drafted token carries a confidence
bin as its rank, so the engine's acceptance estimates are calibrated per bin and depth."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace

import torch

from swiftwriter.engine.decoding.drafter_files import DrafterBundle
from swiftwriter.engine.decoding.logits import LogitsPipeline, PenaltyWindow, penalise
from swiftwriter.engine.decoding.rejection import DraftRecord
from swiftwriter.engine.decoding.settings import SamplingSettings
from swiftwriter.engine.decoding.sources import Candidate, CandidateSource
from swiftwriter.engine.passes import (
    PACKED_KERNEL,
    STOCK_KERNEL,
    adopt_fastest,
    compute_dtype,
    execution_device,
    kernel_product,
    row_values,
    time_linears,
    transpose_linear_weights,
)

CONFIDENCE_BINS = (0.6, 0.3, 0.1)  # rank 0 above 0.6, 1 above 0.3, 2 above 0.1, else 3
# The drafter's own logits get half the penalty's strength (1.1 for 1.2). Measured on greedy
# 1.2/1,024 runs of the shipped drafter, 1,024 tokens, its first-level top-1 against the
# target's penalised choice (harbour prompt halves / a held-out chapter opening's halves):
# full penalty 0.35 / 0.29 / 0.24 / 0.14, half 0.40 / 0.44 / 0.27 / 0.19, none 0.36 / 0.41 /
# 0.23 / 0.21. Its logits are as high as the model's (mean gap on the top 32: 0.6), but its
# margins are smaller, so the full penalty knocks out tokens the target keeps.
DRAFT_PENALTY_SHARE = 0.5


def draft_penalty_share(card: dict) -> float:
    """A drafter trained with the penalty applied to its own scores (against the penalised
    target, see heads/train.py) takes the run's whole penalty; an older one half of it."""
    trained = float(card.get("training", {}).get("penalty", 1.0) or 1.0)
    return 1.0 if trained > 1.0 else DRAFT_PENALTY_SHARE


_BF16_PAYS: dict[tuple, bool] = {}


def bfloat16_if_faster(module: torch.nn.Module) -> tuple[torch.nn.Module, torch.dtype]:
    """(a bfloat16 copy of the drafter, bfloat16) where the model runs bfloat16 and the
    drafter's few-row products measure at least 20% faster so here (a CPU with bfloat16 dot
    products), else (the module, float32). Every drafting step reads the drafter's weights
    (about 15 MB per level in float32) on the host, time the step pays in full; its drafts
    need not be exact, only good. Timed once per drafter shape and process (some ms)."""

    def copy_in(dtype: torch.dtype) -> torch.nn.Module:
        return copy.deepcopy(module).to(dtype)  # a new object: its kernel is chosen anew

    def cost(mod: torch.nn.Module) -> float:
        lins = [m for m in mod.modules() if isinstance(m, torch.nn.Linear)]
        times = time_linears(lins, rows=(1, 3), reps=5)
        return min((sum(t.values()) for t in times.values() if t), default=float("inf"))

    key = tuple(tuple(m.weight.shape) for m in module.modules() if isinstance(m, torch.nn.Linear))
    if not key:
        return module, torch.float32
    if key not in _BF16_PAYS:
        _BF16_PAYS[key] = cost(copy_in(torch.bfloat16)) < 0.8 * cost(copy_in(torch.float32))
    return (copy_in(torch.bfloat16), torch.bfloat16) if _BF16_PAYS[key] else (module, torch.float32)


def confidence_rank(p: float) -> int:
    for rank, edge in enumerate(CONFIDENCE_BINS):
        if p >= edge:
            return rank
    return len(CONFIDENCE_BINS)


def default_tree(kind: str, sampler: str = "") -> tuple[int, ...]:
    """The drafter's candidates per level when the settings name none. Chosen with `bench
    --suite held-out --head-tree` on the default model: each level reads the draft head's
    weights once (~1.5 ms of host time on a CPU), and on varied prose the recurrent drafter's
    second level held ~1 draft in 6 of its first's, so for greedy runs and the same-text
    sampler one level of three beats two (bf16 suite geomean 1.50x, 1.54x and 1.45x in three
    runs against 1.46x; Creative 1.44x against 1.40x). The fastest sampler (`sampler`
    "fastest") accepts siblings by rejection sampling, and there a second level of two pays:
    Creative, bfloat16, four prompts x two seeds, 768 tokens, one level of three 1.39x / 1.42x
    against three then two 1.47x / 1.51x, five then two 1.43x (docs/measurements.md)."""
    if kind == "linear":
        return (3, 3, 3)
    return (3, 2) if sampler == "fastest" else (3,)


class DrafterSource(CandidateSource):
    name = "heads"
    gated = True  # a few ms per call: asked only while its drafts save more (SourceGate)

    def __init__(
        self,
        bundle: DrafterBundle,
        model,
        tree: Sequence[int] = (),
        beam: int = 4,
        vocab_limit: int = 0,
        grow: float = 0.0,
    ):
        self.bundle = bundle
        self.grow = grow
        self.module = bundle.module
        self.kind = bundle.kind
        self.wants_feature = self.module.feature  # "final" or "prenorm"
        head = model.get_output_embeddings()
        # The draft head reads one weight row per draft-vocabulary id on every level: on a CPU
        # that read is the cost, so a drafter may keep only the most frequent ids (stored first).
        vocab = bundle.vocab[:vocab_limit] if vocab_limit > 0 else bundle.vocab
        self.dtype = torch.float32
        device = execution_device(head)
        # a bfloat16 drafter where it measures faster: its drafts need only be good, so a
        # float32 or stored-block target's drafter may round too
        if device.type == "cpu" and compute_dtype(model) in (torch.bfloat16, torch.float32):
            self.module, self.dtype = bfloat16_if_faster(self.module)
        with torch.no_grad():  # the draft vocabulary's rows of the head, whatever form it keeps
            self.w_t = row_values(head, vocab.to(device)).to(self.dtype).T.contiguous()  # [H, N]
            self.embedding = model.get_input_embeddings()
        self.vocab = vocab
        self.vocab_list = vocab.tolist()
        self.tree = tuple(tree) or default_tree(self.kind)
        self.beam = beam
        self.feature: torch.Tensor | None = None
        self.window: PenaltyWindow | None = None
        self.own_window = True  # False while the run's window is shared (start)
        # sampling: the run's temperature, top-p and min-p for the drafter's own distribution,
        # and the noise each drafted position will be drawn with (couple)
        self.sampler: LogitsPipeline | None = None
        self.noise_ahead = None
        # the "fastest" sampler: this call's own noise (sample_drafts) and what was drawn,
        # by path (rejection.DraftRecord)
        self.fresh = None
        self.records: dict[tuple[int, ...], DraftRecord] = {}
        self._row_records: list[DraftRecord] = []
        self.draft_penalty = 1.0  # for the drafter's logits (DRAFT_PENALTY_SHARE)
        self.module.to(self.dtype)
        # the draft head's product: the [H, N] matrix's own (MKL's fast one), or oneDNN's
        self.draft_logits = lambda states: states @ self.w_t
        if device.type == "cpu":  # few-row products take MKL's fast kernel this way
            transpose_linear_weights(self.module)
            # and where one of oneDNN's kernels is the faster one here, the drafter takes it
            chosen = adopt_fastest(self.module)
            if chosen != STOCK_KERNEL:
                fn = kernel_product(chosen)
                weight = self.w_t.T.contiguous() if chosen == PACKED_KERNEL else self.w_t.T
                self.draft_logits = lambda states: fn(states, weight, None)

    # -- engine hooks ---------------------------------------------------------------------------
    def fork(self) -> DrafterSource:
        """The same drafter and weights; `start` gives the copy its own run state."""
        return copy.copy(self)

    def start(
        self, sampling: SamplingSettings, vocab_size: int, window: PenaltyWindow | None = None
    ) -> None:
        """A new generation: forget the last feature, follow this run's penalty over the run's
        own window (a fresh one when drafting alone, as in tests)."""
        self.feature = None
        self.noise_ahead = None
        self.fresh = None
        self.records = {}
        self.sampler = (
            None
            if sampling.greedy
            # the draw's filters alone: banned ids are the target's, not the draft vocabulary's
            else LogitsPipeline(
                replace(sampling, penalty=1.0, dry_multiplier=0.0, banned_tokens=())
            )
        )
        share = draft_penalty_share(self.bundle.card)
        self.draft_penalty = 1.0 + (sampling.penalty - 1.0) * share
        self.own_window = window is None
        if sampling.penalty == 1.0:
            self.window = None
        else:
            self.window = (
                window if window is not None else PenaltyWindow(vocab_size, sampling.window)
            )

    def couple(self, noise) -> None:
        """Sampling: draft the tokens the drafter's distribution draws under the noise the
        target will draw with (logits.Draws), instead of its most likely ones."""
        self.noise_ahead = noise

    def sample_drafts(self, noise) -> None:
        """The "fastest" sampler: the next call draws from the drafter's processed distribution
        with this noise, keeps each node's draws (`drawn`), and ranks its drafts by draw order,
        so the trie's shape never depends on what was drawn (rejection.py)."""
        self.fresh = noise

    def drawn(self) -> dict:
        return self.records

    def _rank(self, slot: int, p: float, last: bool) -> int:
        """A draft's rank: its confidence bin; under the "fastest" sampler, on a level with
        drafts below it, its place among its siblings instead: a bin depends on the draw, and
        the trie's pruning must not depend on the draws below a node it keeps (on the last
        level none are below, and the bins' sharper estimates size the trie better)."""
        if self.fresh is None or last:
            return confidence_rank(p)
        return min(slot, len(CONFIDENCE_BINS))

    def set_feature(self, feature: torch.Tensor) -> None:
        """Fused mode: the state of the node before the newest token."""
        self.feature = feature.detach().to("cpu", self.dtype)

    def observe(self, tokens: Sequence[int]) -> None:
        if self.window is not None and self.own_window:  # the run extends a shared one
            self.window.extend(list(tokens))

    # -- drafting -------------------------------------------------------------------------------
    def _top(
        self, states: torch.Tensor, presence: torch.Tensor | None, k: int, level: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The k draft-vocabulary ids to propose for the `level`-th token after the committed
        text, and the drafter's probability of each ([rows, k] both). Greedy: its k most
        likely. Sampling: the k its processed distribution draws under that token's noise
        (the target's Gumbel winner is among them whenever the two distributions are close),
        or under the "fastest" sampler k drawn from it without replacement (rejection.py);
        ids the run's filters leave no chance fill the rest by likelihood."""
        x = penalise(self.draft_logits(states).float(), presence, self.draft_penalty)
        probs = x.softmax(-1)
        fastest = self.fresh is not None and self.sampler is not None
        if not fastest and (self.noise_ahead is None or self.sampler is None):
            top = probs.topk(k, dim=-1)
            return top.indices, top.values
        # The "fastest" sampler draws each row from its own noise in float64 (so the draws
        # follow q as the acceptance assumes) and keeps (q, the draws) for the walk; the
        # coupled draw reads the noise the target will draw that token with.
        coupled = None if fastest else self.noise_ahead(level)
        likely = probs.topk(k, dim=-1).indices.tolist()
        rows, self._row_records = [], []
        for r, (row, extra) in enumerate(zip(x, likely, strict=True)):
            # the noise read at the ids the filters keep (a few dozen), not the whole vocabulary
            kept, values = self.sampler.kept(row)
            if fastest:
                values = values.double()
                noise = self.fresh(level, r, len(self.vocab))[kept]
            else:
                noise = coupled[self.vocab[kept]].to(torch.float32)
            top = (values + noise).topk(min(k, len(kept)))
            drawn = kept[top.indices[top.values > float("-inf")]].tolist()
            if fastest:
                record = tuple(self.vocab_list[i] for i in drawn)
                self._row_records.append(DraftRecord(self.vocab[kept], values.softmax(-1), record))
            rows.append((drawn + [i for i in extra if i not in drawn])[:k])
        indices = torch.tensor(rows)
        return indices, probs.gather(-1, indices)

    @torch.inference_mode()
    def propose(self, context: Sequence[int], max_candidates: int) -> list[Candidate]:
        self.records = {}
        if self.feature is None or not context:
            return []
        return self.draft(context, None, self.tree)

    def draft(
        self, context: Sequence[int], first: list[tuple[int, float]] | None, tree: Sequence[int]
    ) -> list[Candidate]:
        """The drafter's tree of `tree` widths per level after the committed text, below a
        `first` level of (token id, probability) where one is given (a draft pass's own
        guess, bench/draftpass.py)."""
        full = self.window.presence_on_host() if self.window is not None else None
        presence = full[self.vocab] if full is not None else None
        if self.kind == "linear":
            return self._propose_linear(presence, first, tree)
        return self._propose_recurrent(context[-1], presence, first, tree)

    def _propose_linear(self, presence, first, tree) -> list[Candidate]:
        states = self.module(self.feature[None])
        levels = [first] if first is not None else []
        records: list[DraftRecord | None] = [None] * len(levels)  # a given first level drew none
        for k, state in zip(tree, states, strict=False):
            indices, values = self._top(state, presence, k, len(levels))
            ids = [self.vocab_list[i] for i in indices[0].tolist()]
            levels.append(list(zip(ids, values[0].tolist(), strict=True)))
            records.append(self._row_records[0] if self.fresh is not None else None)
        out: list[Candidate] = []
        paths: list[tuple[tuple[int, ...], tuple[int, ...]]] = [((), ())]
        for depth, level in enumerate(levels):
            for toks, _ in paths if records[depth] is not None else ():
                self.records[toks] = records[depth]  # a level draws once, for all its parents
            paths = [
                (toks + (tok,), ranks + (self._rank(slot, p, depth == len(levels) - 1),))
                for toks, ranks in paths
                for slot, (tok, p) in enumerate(level)
            ]
            out.extend(Candidate(self.name, t, r[-1], ranks=r) for t, r in paths)
        return out

    def _to_grow(self, nodes: list) -> list:
        """The nodes (most probable first) expanded at the next depth: the beam's, while the
        path probability holds `grow` (EAGLE-2's dynamic tree)."""
        if self.fresh is not None:  # "fastest": the shape may not depend on what was drawn
            return nodes[: self.beam]
        return [n for n in nodes[: self.beam] if n[4] >= self.grow]

    def _propose_recurrent(self, last_token: int, presence, first, tree) -> list[Candidate]:
        # frontier: (feature, last token id, path tokens, path ranks, path probability)
        out: list[Candidate] = []
        if first is None:
            frontier = [(self.feature, last_token, (), (), 1.0)]
        else:
            frontier = []
            for slot, (tok, p) in enumerate(first):
                node = (self.feature, tok, (tok,), (self._rank(slot, p, not tree),), p)
                frontier.append(node)
                out.append(Candidate(self.name, node[2], node[3][-1], ranks=node[3]))
            frontier = self._to_grow(frontier)
        for level, k in enumerate(tree):
            if not frontier:  # no path confident enough to grow (EAGLE-2's dynamic tree)
                break
            feats = torch.stack([f for f, *_ in frontier])
            toks = torch.tensor([t for _, t, *_ in frontier])
            states = self.module(feats, row_values(self.embedding, toks).to(self.dtype))
            indices, values = self._top(states, presence, k, len(frontier[0][2]))
            children = []
            for row, (_f, _t, path, ranks, p_path) in enumerate(frontier):
                if self.fresh is not None:
                    self.records[path] = self._row_records[row]
                for slot, (i, p) in enumerate(
                    zip(indices[row].tolist(), values[row].tolist(), strict=True)
                ):
                    tok = self.vocab_list[i]
                    cand = (
                        states[row],
                        tok,
                        path + (tok,),
                        ranks + (self._rank(slot, p, level == len(tree) - 1),),
                        p_path * p,
                    )
                    children.append(cand)
                    out.append(Candidate(self.name, cand[2], cand[3][-1], ranks=cand[3]))
            if self.fresh is None:  # the "fastest" sampler grows by draw order, not by value
                children.sort(key=lambda c: -c[4])
            frontier = self._to_grow(children)
        return out

"""The generation loop: draft a trie, verify it in one pass, accept exactly what the target
model would have produced, compact the cache, repeat; one event per step so callers can stream
and cancel between steps.

Greedy: at each visited node the target's argmax (after the logits pipeline with that node's
own penalty window) is compared with the node's children. Sampling: one target sample per
visited node, descending into the child that matches it; the first mismatch emits that sample.
Either way every emitted token is drawn from exactly the distribution plain decoding uses."""

from __future__ import annotations

import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch

from swiftwriter.engine import quality
from swiftwriter.engine.estimate import (
    AcceptanceEstimator,
    CostModel,
    ShadowLearner,
    SourceGate,
)
from swiftwriter.engine.logits import LogitsPipeline, PenaltyWindow
from swiftwriter.engine.settings import ContextSettings, DraftSettings, SamplingSettings
from swiftwriter.engine.sources import CandidateSource, build_sources
from swiftwriter.engine.stats import RunStats, StepStats
from swiftwriter.engine.trie import best_size, build_trie, prune
from swiftwriter.engine.verify import ModelRunner
from swiftwriter.engine.window import ContextWindow
from swiftwriter.errors import UserError

# One cost model per model object and pass kind (invariant or not): measured once, then refined
# by every run on that model.
_COSTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass
class StepEvent:
    tokens: list[int]  # newly committed token ids
    step: StepStats
    run: RunStats
    done: bool = False
    stop_reason: str = ""


def context_length(config) -> int | None:
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


class Generator:
    """Plain or speculative generation with one model, one sampling pipeline and some sources."""

    def __init__(
        self,
        model,
        sampling: SamplingSettings | None = None,
        drafting: DraftSettings | None = None,
        sources: Sequence[CandidateSource] | None = None,
        eos_ids: Sequence[int] = (),
        calibrate: bool = True,
        context: ContextSettings | None = None,
        drafter=None,
        invariant: bool = True,
    ):
        """`invariant` (default): every pass computes each row as the one-token pass does, so
        speculation writes plain decoding's text in every dtype (engine/invariant.py); off,
        passes take the fastest kernels for their size (float32 then matches up to rounding,
        bfloat16 and float16 may write another text)."""
        self.model = model
        self.invariant = invariant
        self.sampling = sampling or SamplingSettings()
        self.drafting = drafting if drafting is not None else DraftSettings()
        self.extra_sources = list(sources or [])
        self.eos_ids = set(int(e) for e in eos_ids)
        self.calibrate = calibrate
        self.context = context or ContextSettings()
        self._view: ContextWindow | None = None
        self.vocab_size = (
            model.get_output_embeddings().weight.shape[0]
            if model.get_output_embeddings() is not None
            else model.config.vocab_size
        )
        self.max_context = context_length(model.config)
        self.pipeline = LogitsPipeline(self.sampling)
        self.costs = _COSTS.setdefault(model, {}).setdefault(invariant, CostModel())
        self.stats = RunStats()
        self.drafter_source = None
        if drafter is not None:
            from swiftwriter.engine.heads.source import DrafterSource

            self.drafter_source = DrafterSource(
                drafter,
                model,
                self.drafting.head_tree,
                self.drafting.head_beam,
                self.drafting.head_vocab,
            )

    # -- the loop ---------------------------------------------------------------------------
    def generate(
        self,
        prompt_ids: Sequence[int],
        max_new_tokens: int,
        should_stop: Callable[[], bool] | None = None,
        stop_on_text: Callable[[list[int]], bool] | None = None,
        seed: int | None = None,
        pinned_ids: Sequence[int] = (),
        min_new_tokens: int = 0,
    ) -> Iterator[StepEvent]:
        """Yield one StepEvent per verification step until max tokens, EOS, a stop string
        (`stop_on_text(all_new_ids)` returns True), or `should_stop()` (cancellation).
        `seed` overrides the settings' seed for this call (sampling only). End-of-text is
        forbidden before `min_new_tokens` (its logits set to -inf at those positions, for every
        trie node by its depth: plain decoding does the same, so the text stays exact). A stop
        string is checked after every token, and the step is cut at the first token where it
        holds, as plain decoding would have stopped there."""
        prompt = [int(t) for t in prompt_ids]
        self._check_request(prompt, max_new_tokens)
        sampling = self.sampling
        runner = ModelRunner(self.model, invariant=self.invariant)
        sources = (
            build_sources(
                self.drafting.sources, self.drafting.ngram_branches, self.drafting.suffix_max_len
            )
            + self.extra_sources
        )
        if (
            self.drafter_source is not None
            and "heads" in self.drafting.sources
            and self.drafting.max_nodes > 0
        ):
            sources.insert(0, self.drafter_source)
        for src in sources:
            if hasattr(src, "start"):
                src.start(sampling, self.vocab_size)
        readers = [s for s in sources if getattr(s, "wants_feature", None)]
        if any(s.wants_feature == "prenorm" for s in readers):
            runner.enable_prenorm()
        draft_pass = None
        if readers and self.drafting.draft_mode == "pass":
            from swiftwriter.engine.heads.draftpass import DraftPass

            draft_pass = DraftPass(self.model, self.drafting.partial_budget)
        estimator = AcceptanceEstimator()
        gates = {id(s): SourceGate() for s in sources if getattr(s, "gated", False)}
        learner = ShadowLearner(estimator)
        window = PenaltyWindow(self.vocab_size, sampling.window, device=runner.device)
        rng = None
        if not sampling.greedy:
            rng = torch.Generator(device="cpu")
            seed = seed if seed is not None else sampling.seed
            rng.manual_seed(seed if seed is not None else torch.seed())
        stats = self.stats = RunStats(prompt_tokens=len(prompt))
        stats.dtype = str(runner.dtype).removeprefix("torch.")
        stats.invariant = runner.invariant

        t0 = time.perf_counter()
        view = self._view = ContextWindow(self.max_context, self.context, prompt, pinned_ids)
        if view.needs_slide(prompt):  # "slide": a prompt longer than the context is windowed
            stats.windowed_from = 0
            runner.prefill(view.slide(prompt)[:-1])
        else:
            runner.prefill(prompt[:-1])
        stats.prefill_s = time.perf_counter() - t0
        stats.kv_tokens_cap = self.max_context
        window.extend(prompt)
        for src in sources:
            src.observe(prompt)
        for src in readers:
            feature = runner.prefill_features.get(src.wants_feature)
            if feature is not None:
                src.set_feature(feature)
        if self.calibrate and sources and self.drafting.max_nodes > 0 and not self.costs.ready():
            for n in (1, 2, 4, 8, 16, 32):  # once per model; refined online
                self.costs.observe(n, min(runner.time_pass(n) for _ in range(2)), weight=1.0)

        try:
            committed = list(prompt)
            produced: list[int] = []
            while True:
                if should_stop is not None and should_stop():
                    stats.stop_reason = "cancelled"
                    stats.quality = quality.summary(produced)  # once per run: cheap enough
                    yield StepEvent(
                        [], StepStats(0, 0, 0, {}, [], 0, 0, 0), stats, True, "cancelled"
                    )
                    return
                if view.needs_slide(committed):
                    self._slide(runner, view, committed, stats, len(produced), readers)
                remaining = min(max_new_tokens - len(produced), self._room(committed))
                t_draft = time.perf_counter()
                candidates, gated_s = self._candidates(sources, committed, gates, stats)
                trie = build_trie(committed[-1], candidates, estimator, self.drafting.max_depth)
                learner.add(len(committed), trie)
                budget = min(self.drafting.max_nodes, remaining - 1)
                keep = 0
                if budget > 0 and len(trie) > 1:
                    probs = sorted(trie.probs[1:], reverse=True)
                    keep = (
                        best_size(probs, self.costs, budget) if self.drafting.adaptive else budget
                    )
                trie = prune(trie, keep)
                t_verify = time.perf_counter()
                runner.forward_trie(trie)
                stats.kv_tokens_max = max(stats.kv_tokens_max, runner.length + len(trie))
                banned = max(0, min_new_tokens - len(produced))  # EOS forbidden this deep
                path, new = self._walk(trie, runner, window, rng, remaining, banned)
                if stop_on_text is not None:
                    new, path = self._cut_at_stop(produced, new, path, stop_on_text)
                t_after = time.perf_counter()
                for src in readers if draft_pass is None else ():
                    # fused drafting: the last accepted node's state, no extra pass
                    feature = runner.feature_at(path[-1] if path else 0, src.wants_feature)
                    if feature is not None:
                        src.set_feature(feature)
                runner.compact([0] + path)
                self._judge_gated(gates, gated_s, sources, trie, path)
                self.costs.observe(len(trie), t_after - t_verify)
                by_source: Counter = Counter()
                by_depth = [0] * len(path)
                for node in path:
                    by_depth[trie.depths[node] - 1] += 1
                    for src in trie.sources[node]:
                        stats.accepted_by_source_depth[f"{src}:{trie.depths[node]}"] += 1
                    by_source[
                        trie.sources[node][0]
                        if len(trie.sources[node]) == 1
                        else "+".join(trie.sources[node])
                    ] += 1
                committed.extend(new)
                learner.update(committed)
                produced.extend(new)
                window.extend(new)
                for src in sources:
                    src.observe(new)
                t_end = time.perf_counter()
                step = StepStats(
                    len(new),
                    len(trie) - 1,
                    len(path),
                    dict(by_source),
                    by_depth,
                    t_verify - t_draft,
                    t_after - t_verify,
                    t_end - t_after,
                )
                stats.add(step)
                stats.source_sizes = _sizes(sources)
                reason = self._stop_reason(new, produced, max_new_tokens, committed, stop_on_text)
                if draft_pass is not None and not reason:
                    t_pass = time.perf_counter()
                    draft_pass.run(runner, committed[-1], readers)
                    stats.draft_s += time.perf_counter() - t_pass
                if reason:
                    stats.stop_reason = reason
                    stats.quality = quality.summary(produced)
                yield StepEvent(new, step, stats, bool(reason), reason)
                if reason:
                    return
        finally:
            runner.close()

    # -- pieces -----------------------------------------------------------------------------
    def _candidates(self, sources, committed, gates, stats: RunStats):
        """Every source's proposals, and the seconds each gated source took (id -> s)."""
        if self.drafting.max_nodes <= 0:
            return [], {}
        out, gated_s = [], {}
        for src in sources:
            gate = gates.get(id(src))
            if gate is not None and not gate.wanted():
                stats.gated_skips += 1
                continue
            t = time.perf_counter()
            out.extend(src.propose(committed, self.drafting.ngram_branches))
            if gate is not None:
                gated_s[id(src)] = time.perf_counter() - t
        return out, gated_s

    def _judge_gated(self, gates, gated_s, sources, trie, path) -> None:
        """Tell each gated source that was asked what its drafts saved this step: a pass for
        every accepted node only it proposed, less its nodes' share of the pass's extra cost."""
        if not gated_s:
            return
        one = self.costs.base or 0.0
        extra = (self.costs(len(trie)) - 1.0) * one
        drafted = max(1, len(trie) - 1)
        for src in sources:
            if id(src) not in gated_s:
                continue
            mine = sum(src.name in trie.sources[node] for node in range(1, len(trie)))
            alone = sum(trie.sources[node] == (src.name,) for node in path)
            gates[id(src)].observe(gated_s[id(src)], alone * one - extra * mine / drafted)

    @staticmethod
    def _cut_at_stop(produced, new, path, stop_on_text):
        """The step's tokens up to the first one after which `stop_on_text` holds."""
        for i in range(len(new) - 1):
            if stop_on_text(produced + new[: i + 1]):
                return new[: i + 1], path[:i]  # the cache keeps all but the last token
        return new, path

    def _walk(
        self, trie, runner: ModelRunner, window: PenaltyWindow, rng, remaining: int, banned: int = 0
    ):
        """Follow the target's choices down the trie. Returns (accepted node path, new tokens).
        The first `banned` tokens may not be end-of-text."""
        node, path, new = 0, [], []
        eos = sorted(self.eos_ids)
        while True:
            logits = runner.logits_at(node, trie)
            if len(new) < banned and eos:
                logits = logits.clone()
                logits[..., eos] = float("-inf")
            above = trie.path_to(node)  # plain decoding's context here: history + these
            presence = window.presence(above) if self.sampling.penalty != 1.0 else None
            context = window.context(above) if self.sampling.dry_multiplier > 0 else None
            token = self.pipeline.choose(self.pipeline.process(logits, presence, context), rng)
            child = trie.children[node].get(token)
            new.append(token)
            if child is None or len(new) >= remaining or token in self.eos_ids:
                return path, new
            path.append(child)
            node = child

    def _room(self, committed: list[int]) -> int:
        """Tokens the model's view may still grow by before its context window is full."""
        if self._view is not None:
            return self._view.room(committed)
        if self.max_context is None:
            return 1 << 30
        return self.max_context - len(committed)

    def _slide(self, runner, view: ContextWindow, committed, stats: RunStats, produced, readers):
        """Rebuild the cache on the window (sinks + pinned + recent text, positions from 0)."""
        t = time.perf_counter()
        runner.reset()
        runner.prefill(view.slide(committed)[:-1])
        for src in readers:  # drafters that read the newest hidden state
            feature = runner.prefill_features.get(src.wants_feature)
            if feature is not None:
                src.set_feature(feature)
        if stats.windowed_from is None:
            stats.windowed_from = produced
        stats.reprefills += 1
        elapsed = time.perf_counter() - t
        stats.reprefill_s += elapsed
        stats.overhead_s += elapsed  # part of the run's wall time

    def _stop_reason(self, new, produced, max_new_tokens, committed, stop_on_text) -> str:
        if any(t in self.eos_ids for t in new):
            return "eos"
        if len(produced) >= max_new_tokens:
            return "length"
        if stop_on_text is not None and stop_on_text(produced):
            return "stop_string"
        if self.context.policy == "stop" and self._room(committed) < 1:
            return "context_full"
        return ""

    def _check_request(self, prompt: list[int], max_new_tokens: int) -> None:
        if not prompt:
            raise UserError("The prompt is empty: give at least one token")
        if max_new_tokens < 1:
            raise UserError(f"max_new_tokens must be at least 1, not {max_new_tokens}")
        if any(t < 0 or t >= self.vocab_size for t in prompt):
            raise UserError("The prompt holds token ids outside the model's vocabulary")
        if (
            self.max_context is not None
            and len(prompt) >= self.max_context
            and self.context.policy == "stop"
        ):
            raise UserError(
                f"The prompt has {len(prompt)} tokens but the model's context holds {self.max_context}: "
                "shorten the prompt (or choose the sliding-window policy)"
            )


def _sizes(sources) -> dict:
    """Entries held by each source that reports its footprint, with its cap (bounded memory)."""
    out = {}
    for src in sources:
        footprint = getattr(src, "footprint", None)
        if footprint is not None:
            size = footprint()
            if size:
                out[src.name] = size
    return out

"""The generation loop: per step, propose drafts, build a trie, verify it in one pass, accept
exactly what the target model would have produced, commit (cache compaction, source updates);
one event per step so callers can stream and cancel between steps. The stages are the methods
of a per-run object (run.py).

Greedy: at each visited node the target's argmax (after the logits pipeline with that node's
own penalty window) is compared with the node's children. Sampling: one target sample per
visited node, descending into the child that matches it; the first mismatch emits that sample.
Either way every emitted token is drawn from exactly the distribution plain decoding uses."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence

from swiftwriter.engine.decoding.estimate import CostModel
from swiftwriter.engine.decoding.events import SideEvent, StepEvent
from swiftwriter.engine.decoding.logits import LogitsPipeline
from swiftwriter.engine.decoding.run import Request, Run
from swiftwriter.engine.decoding.settings import ContextSettings, DraftSettings, SamplingSettings
from swiftwriter.engine.decoding.sources import CandidateSource, build_sources
from swiftwriter.engine.decoding.stats import RunStats, StepStats
from swiftwriter.engine.decoding.together import generate_together
from swiftwriter.engine.passes import (
    exact_by_default,
    execution_device,
    settings_for,
    thread_invariant,
)
from swiftwriter.errors import UserError


def context_length(config) -> int | None:
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def vocab_size_of(model) -> int:
    """The token ids the model can read and write: 0 to this, less one."""
    head = model.get_output_embeddings()
    if head is None:
        return model.config.vocab_size
    return getattr(head, "out_features", None) or head.weight.shape[0]


class Generator:
    """Plain or speculative generation with one model, one sampling pipeline and some sources.

    `run_type` is the Run each `generate` call creates: a subclass may change its stages and
    keep the loop (the bench's draft-pass experiment, bench/draftpass.py, and tests do)."""

    run_type = Run  # one generation's state and stages

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
        invariant: bool | None = None,
        sync_timing: bool = False,
        batched_accept: bool | None = None,
        tune_threads: bool | None = None,
    ):
        """`invariant` (the model's default, normally on): every pass computes each row as the
        one-token pass does, so speculation writes plain decoding's text in every dtype
        (engine/passes/invariant.py); off, passes take the fastest kernels for their size (float32
        then matches up to rounding, bfloat16 and float16 may write another text)."""
        self.model = model
        self.invariant = exact_by_default(model) if invariant is None else invariant
        # the thread count chosen as the run goes (engine/decoding/threads.py), where a pass's
        # bits cannot depend on it
        self.tune_threads = thread_invariant(model) if tune_threads is None else tune_threads
        self.sync_timing = sync_timing  # wait for each pass on a GPU: model vs host time
        # greedy choices for every node in one read per step: where reads stall a device's
        # queue (the default off a CPU); on a CPU the lm_head runs only where the walk goes
        if batched_accept is None:
            head = model.get_output_embeddings()
            batched_accept = execution_device(head if head is not None else model).type != "cpu"
        self.batched_accept = batched_accept
        self.sampling = sampling or SamplingSettings()
        self.drafting = drafting if drafting is not None else DraftSettings()
        self.extra_sources = list(sources or [])
        self.eos_ids = set(int(e) for e in eos_ids)
        self.calibrate = calibrate
        self.context = context or ContextSettings()
        self.vocab_size = vocab_size_of(model)
        self.max_context = self.context.window(context_length(model.config))
        self.pipeline = LogitsPipeline(self.sampling)
        # one cost model per model and pass kind (invariant or not): measured once, then
        # refined by every run on that model
        self.costs = settings_for(model).costs.setdefault(invariant, CostModel())
        self.stats = RunStats()
        self.together_stats: dict[int, RunStats] = {}  # generate_together's, by generation
        self.drafter_source = None
        if drafter is not None:
            from swiftwriter.engine.decoding.drafter_source import (  # lazy: pulls in safetensors
                DrafterSource,
                default_tree,
            )

            sampler = "" if self.sampling.greedy else self.drafting.sampler
            self.drafter_source = DrafterSource(
                drafter,
                model,
                self.drafting.head_tree or default_tree(drafter.kind, sampler),
                self.drafting.head_beam,
                self.drafting.head_vocab,
                grow=self.drafting.head_grow,
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
        request = Request(prompt, max_new_tokens, stop_on_text, seed, pinned_ids, min_new_tokens)
        run = self.run_type(self, request, self._sources())
        self.stats = run.stats
        try:
            run.start()
            while True:
                if should_stop is not None and should_stop():
                    run.finish("cancelled")
                    empty = StepStats(0, 0, 0, {}, [], 0, 0, 0)
                    yield StepEvent([], empty, run.stats, True, "cancelled")
                    return
                run.slide_if_full()
                t_draft = time.perf_counter()
                trie = run.build_trie(run.propose())
                t_verify = time.perf_counter()
                run.verify(trie)
                t_model = time.perf_counter()
                path, new = run.accept(trie)
                t_after = time.perf_counter()
                run.commit(trie, path, new, t_after - t_verify)
                times = (t_draft, t_verify, t_model, t_after, time.perf_counter())
                step = run.record(trie, path, new, times)
                reason = run.stop_reason(new)
                if reason:
                    run.finish(reason)
                yield StepEvent(new, step, run.stats, bool(reason), reason)
                if reason:
                    return
        finally:
            run.close()

    def generate_together(
        self,
        prompt_ids: Sequence[int],
        max_new_tokens: int,
        seeds: Sequence[int | None],
        should_stop: Callable[[], bool] | None = None,
        stop_on_text: Callable[[list[int]], bool] | None = None,
        pinned_ids: Sequence[int] = (),
        min_new_tokens: int = 0,
    ) -> Iterator[SideEvent]:
        """One generation per seed of the same prompt, written side by side with one model
        pass per step for all of them (together.py): yields a SideEvent (which generation,
        its StepEvent) per generation per step. Each generation is the one `generate` writes
        for its seed; `together_stats` holds their RunStats."""
        prompt = [int(t) for t in prompt_ids]
        self._check_request(prompt, max_new_tokens)
        if not seeds:
            raise UserError("Name at least one seed: one generation per seed")
        requests = [
            Request(prompt, max_new_tokens, stop_on_text, seed, pinned_ids, min_new_tokens)
            for seed in seeds
        ]
        self.together_stats = {}
        for side in generate_together(self, requests, should_stop):
            self.together_stats[side.index] = side.event.run
            yield side

    def _sources(self) -> list[CandidateSource]:
        """This run's drafters: the built-in ones chosen, the caller's, and the learned drafter
        first when it is wanted."""
        drafting = self.drafting
        sources = (
            build_sources(drafting.sources, drafting.ngram_branches, drafting.suffix_max_len)
            + self.extra_sources
        )
        if (
            self.drafter_source is not None
            and "heads" in drafting.sources
            and drafting.max_nodes > 0
        ):
            sources.insert(0, self.drafter_source)
        return sources

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

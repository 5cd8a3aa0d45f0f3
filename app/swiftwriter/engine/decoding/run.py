"""One generation's state and the stages of its step: propose -> build trie -> verify -> accept
-> commit. The generator (generator.py) creates a Run per call and loops over its steps; the
Run owns what lives for one generation only (the KV cache, the sources' run state, the
penalty window, the sampling seed's draws, the estimates' run parts and the statistics)."""

from __future__ import annotations

import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from swiftwriter.engine.decoding import quality
from swiftwriter.engine.decoding.estimate import (
    AcceptanceEstimator,
    PaceKeeper,
    ShadowLearner,
    SourceGate,
)
from swiftwriter.engine.decoding.logits import Draws, GumbelRow, PenaltyWindow
from swiftwriter.engine.decoding.rejection import FASTEST, DraftRecord, RejectionDraws, resolve
from swiftwriter.engine.decoding.sources import Candidate, CandidateSource
from swiftwriter.engine.decoding.stats import RunStats, StepStats
from swiftwriter.engine.decoding.threads import tuner
from swiftwriter.engine.decoding.trie import Trie, best_size, build_apart, build_trie, prune
from swiftwriter.engine.decoding.window import ContextWindow
from swiftwriter.engine.passes import ModelRunner, quantized_model, to_host


@dataclass
class Request:
    """What one call asks for (Generator.generate's arguments)."""

    prompt: list[int]
    max_new_tokens: int
    stop_on_text: Callable[[list[int]], bool] | None = None
    seed: int | None = None
    pinned: Sequence[int] = ()
    min_new_tokens: int = 0


log = logging.getLogger(__name__)
STEP_LOG_EVERY = 64  # a debug line per this many steps: a long take's steps without a flood

STORED = "stored"  # the loader's name for a model computing from a GGUF file's blocks


def precision_name(model, dtype: torch.dtype) -> str:
    """The precision the stats say: "stored" for a model on a GGUF file's blocks (its
    activations are float32, but calling it float32 contradicted the loader and `auto`'s
    reason in the Speed dock), else the dtype's name."""
    return STORED if quantized_model(model) else str(dtype).removeprefix("torch.")


class Run:
    """One generation: set up (sources, prefill, cost calibration), then one `step` per
    verification pass until `stop_reason` says why it ends."""

    def __init__(self, gen, request: Request, sources: list[CandidateSource], backend=None):
        """`backend`: another run's model backend, for runs verified together (together.py)."""
        self.gen, self.request = gen, request
        self.drafting, self.sampling = gen.drafting, gen.sampling
        self.runner = ModelRunner(gen.model, invariant=gen.invariant, backend=backend)
        self.sources = sources
        self.readers = [s for s in sources if s.wants_feature]
        self.gates = {id(s): SourceGate() for s in sources if s.gated}
        drafts = bool(sources) and self.drafting.max_nodes > 0
        paced = drafts and self.drafting.adaptive and self.drafting.pace
        self.pace = PaceKeeper() if paced else None
        self.estimator = AcceptanceEstimator()
        self.learner = ShadowLearner(self.estimator)
        self.window = PenaltyWindow(gen.vocab_size, self.sampling.window, device=self.runner.device)
        self.draws = self._draws(request.seed)
        # the "fastest" sampler's walk (rejection.py): drafts judged by recursive rejection
        fastest = self.draws is not None and self.drafting.sampler == FASTEST
        self.rejection = RejectionDraws(self.draws.seed) if fastest else None
        self._drawn: dict[tuple[int, ...], DraftRecord] = {}  # this step's drafters' draws, by path
        self._sampled: set[str] = set()  # the sources that drew them
        # every node's choice in one read per step (the rejection walk goes node by node)
        self.batched = gen.batched_accept and self.rejection is None
        self._read_features: dict[str, torch.Tensor] = {}
        self.committed = list(request.prompt)
        self.produced: list[int] = []
        self.stats = RunStats(prompt_tokens=len(request.prompt))
        self.stats.dtype = precision_name(gen.model, self.runner.dtype)
        self.stats.invariant = self.runner.invariant
        self.stats.sampler = "greedy" if self.draws is None else self.drafting.sampler
        self.view = ContextWindow(gen.max_context, gen.context, request.prompt, request.pinned)
        self._gated_s: dict[int, float] = {}
        # tokens committed since the sources last saw the text: plain steps leave them here
        # (a plain step costs what plain decoding's does), the next drafting step hands them on
        self._unseen: list[int] = []
        self.head_s = 0.0  # this step's lm_head calls (model time spent inside the walk)
        # the compute threads, chosen by measurement as the run goes (CPU passes only)
        self.threads = tuner() if self.runner.device.type == "cpu" and gen.tune_threads else None

    def _draws(self, seed: int | None) -> Draws | None:
        """The run's random numbers (sampling only): the call's seed, the settings', or a fresh one."""
        if self.sampling.greedy:
            return None
        seed = seed if seed is not None else self.sampling.seed
        return Draws(seed if seed is not None else secrets.randbits(63))

    # -- set-up ------------------------------------------------------------------------------
    def start(self, prefilled: Run | None = None) -> None:
        """Sources told the run's settings, the prompt prefilled (or `prefilled`'s cache of
        the same prompt copied) and observed, the pass costs measured once per model."""
        for src in self.sources:
            src.start(self.sampling, self.gen.vocab_size, self.window)
            if self.draws is not None and self.drafting.couple and self.rejection is None:
                src.couple(self.noise_ahead)
        if any(s.wants_feature == "prenorm" for s in self.readers):
            self.runner.enable_prenorm()
        prompt, stats = self.request.prompt, self.stats
        t0 = time.perf_counter()
        ids = prompt[:-1]
        if self.view.needs_slide(prompt):  # "slide": a prompt longer than the context is windowed
            stats.windowed_from = 0
            ids = self.view.slide(prompt)[:-1]
            stats.slid_out = self.view.slid_out()
        if prefilled is not None:
            self.runner.copy_from(prefilled.runner)
        else:
            self.runner.prefill(ids)
        stats.prefill_s = time.perf_counter() - t0
        log.debug(
            "run start: %d prompt tokens %s in %.3f s, %s, sampler %s, %d sources",
            len(prompt), "copied" if prefilled is not None else "prefilled", stats.prefill_s,
            stats.dtype, stats.sampler, len(self.sources),
        )  # fmt: skip
        stats.kv_tokens_cap = self.gen.max_context
        self.window.extend(prompt)
        for src in self.sources:
            src.observe(prompt)
        self._hand_prefill_features()
        costs = self.gen.costs
        if (
            self.gen.calibrate
            and self.sources
            and self.drafting.max_nodes > 0
            and not costs.ready()
        ):
            sizes = (1, 2, 4, 8, 16, 32)  # once per model; refined online (CostModel)
            # sizes taken in turns, so a slow moment lands on every size rather than on one
            times = [[self.runner.time_pass(n) for n in sizes] for _ in range(2)]
            for n, seconds in zip(sizes, map(min, zip(*times, strict=True)), strict=True):
                costs.observe(n, seconds, weight=1.0)

    def _hand_prefill_features(self) -> None:
        for src in self.readers:
            feature = self.runner.prefill_features.get(src.wants_feature)
            if feature is not None:
                src.set_feature(feature)

    def slide_if_full(self) -> None:
        """Move the cache to the window (sinks + pinned + recent text, positions from 0): by a
        cache edit ("shift": the dropped span cut out, the kept keys turned to their new
        positions), else by rebuilding it on the window ("reprefill", or where a shift would
        not be exact). Plain decoding and speculation take the same way at the same token."""
        if not self.view.needs_slide(self.committed):
            return
        t = time.perf_counter()
        stats = self.stats
        span = None
        if self.gen.context.slide_mode == "shift":
            span = self.view.shift_span(self.committed)
        view = self.view.slide(self.committed)
        why = self.runner.shift(*span) if span is not None else "reprefill"
        if span is not None and not why:
            stats.shifts += 1
        else:
            if span is not None:
                stats.slide_fallback = why
            self.runner.reset()
            self.runner.prefill(view[:-1])
            self._hand_prefill_features()  # drafters that read the newest hidden state
            stats.reprefills += 1
        if stats.windowed_from is None:
            stats.windowed_from = len(self.produced)
        stats.slid_out = self.view.slid_out()
        stats.slides += 1
        elapsed = time.perf_counter() - t
        if why:
            stats.reprefill_s += elapsed
            stats.model_s += elapsed  # a model pass, not host work
        else:
            stats.shift_s += elapsed
        stats.overhead_s += elapsed  # part of the run's wall time

    # -- the stages of a step ----------------------------------------------------------------
    def room(self) -> int:
        """Tokens this step may write: the request's rest and the context's room."""
        return min(self.request.max_new_tokens - len(self.produced), self.view.room(self.committed))

    def propose(self) -> list[Candidate]:
        """Every source's proposals; gated sources only while they pay (their time noted)."""
        self._gated_s = {}
        if self.drafting.max_nodes <= 0:
            return []
        if self.pace is not None and not self.pace.drafting():
            return []  # a plain step: drafting has not been paying on this text
        if self.drafting.adaptive and self.gen.costs.wants_one():
            return []  # a plain step now and then keeps the pass costs measured (CostModel)
        self._catch_up()
        out = []
        vocab = self.gen.vocab_size
        self._drawn, self._sampled = {}, set()
        for src in self.sources:
            gate = self.gates.get(id(src))
            if gate is not None and not gate.wanted():
                self.stats.gated_skips += 1
                continue
            t = time.perf_counter()
            if self.rejection is not None:
                src.sample_drafts(self.rejection.next_call())
            # a draft the model cannot read (a damaged history's ids) is never verified
            out.extend(
                c
                for c in src.propose(self.committed, self.drafting.ngram_branches)
                if all(0 <= token < vocab for token in c.tokens)
            )
            drawn = src.drawn() if self.rejection is not None else {}
            if drawn:
                self._drawn.update(drawn)
                self._sampled.add(src.name)
            if gate is not None:
                self._gated_s[id(src)] = time.perf_counter() - t
        return out

    def _catch_up(self) -> None:
        """The sources read the tokens of the plain steps since they last drafted (and the
        shadow learner judges its tries): this drafting step pays for it, as it should, and
        the pace keeper's plain steps are timed as plain decoding runs."""
        if self._unseen:
            for src in self.sources:
                src.observe(self._unseen)
            self._unseen = []
        self.learner.update(self.committed)

    def build_trie(self, candidates: list[Candidate], others: tuple[int, float] = (0, 0.0)) -> Trie:
        """The proposals merged, then pruned to the size the cost model says pays best (under
        the "fastest" sampler, the drawn drafts pruned apart from the others and merged after,
        so whether a node is kept never depends on what a drafter drew below it). `others`:
        the rows and expected tokens of the runs verified in the same pass (together.py)."""
        root, depth = self.committed[-1], self.drafting.max_depth
        trie = build_trie(root, candidates, self.estimator, depth)
        self.learner.add(len(self.committed), trie)
        budget = min(self.drafting.max_nodes, self.room() - 1)

        def size(probs: list[float]) -> int:
            if budget <= 0 or not probs:
                return 0
            probs = sorted(probs, reverse=True)
            if not self.drafting.adaptive:
                return budget
            return best_size(probs, self.gen.costs, budget, rows=others[0], tokens=others[1])

        if self._sampled:
            groups = (
                [c for c in candidates if c.source in self._sampled],
                [c for c in candidates if c.source not in self._sampled],
            )
            return build_apart(root, groups, self.estimator, depth, size)
        return prune(trie, size(trie.probs[1:]))

    def verify(self, trie: Trie) -> None:
        """One model pass over every trie node (waited for when timings are synchronised, so
        the model's time is told apart from the host's on an asynchronous device)."""
        self.head_s = 0.0
        if self.threads is not None:
            self.threads.before()
        self.runner.forward_trie(trie)
        self._sync()
        self.stats.kv_tokens_max = max(self.stats.kv_tokens_max, self.runner.length + len(trie))

    def accept(self, trie: Trie) -> tuple[list[int], list[int]]:
        """Follow the target's choices down the trie: (accepted nodes, new tokens), cut where a
        stop string first holds."""
        self._nats: dict[int, float] = {}  # node -> -log p of the token chosen there (raw)
        path, new = self._walk(trie, self.room())
        if self.request.stop_on_text is not None:
            new, path = cut_at_stop(self.produced, new, path, self.request.stop_on_text)
        visited = [0, *path]  # the i-th new token was chosen at visited[i]
        nats = [self._nats.get(visited[i]) for i in range(len(new))]
        self.stats.add_surprise([n for n in nats if n is not None])
        return path, new

    def _walk(self, trie: Trie, remaining: int):
        """At each node the token plain decoding would choose there (the pipeline with that
        node's own penalty context; when sampling, the Gumbel noise of that token's index in
        the text); descend while a child holds it. Each choice is computed when the walk gets
        there, or, `batched`, every node's at once with one read from the device. End-of-text
        is forbidden for the request's first `min_new_tokens` tokens. Returns (accepted nodes,
        new tokens)."""
        if self.batched:
            choose = self._choose_all(trie).__getitem__
        else:
            choose = self._chooser(trie, self._judge if self.rejection is not None else None)
        eos_ids = self.gen.eos_ids
        node, path, new = 0, [], []
        while True:
            token = choose(node)
            child = trie.children[node].get(token)
            new.append(token)
            if child is None or len(new) >= remaining or token in eos_ids:
                return path, new
            path.append(child)
            node = child

    def _chooser(self, trie: Trie, judge=None):
        """Plain decoding's choice after one node, computed when the walk gets there (or,
        with `judge`, the "fastest" sampler's: `judge(processed, trie, node)`)."""
        pipeline, sampling = self.gen.pipeline, self.sampling
        banned = max(0, self.request.min_new_tokens - len(self.produced))
        eos = sorted(self.gen.eos_ids)

        def choose(node: int) -> int:
            logits = self._timed_head(self.runner.logits_at, node, trie)
            if trie.depths[node] < banned and eos:
                logits = logits.clone()
                logits[..., eos] = float("-inf")
            above = trie.path_to(node)  # plain decoding's context here: history + these
            presence = self.window.presence(above) if sampling.penalty != 1.0 else None
            context = self.window.context(above) if sampling.dry_multiplier > 0 else None
            processed = pipeline.process(logits, presence, context)
            if judge is not None:
                token = judge(processed, trie, node)
            else:
                token = pipeline.choose(processed, self.noise(trie.depths[node]))
            raw = logits.reshape(-1).float()
            self._nats[node] = float(torch.logsumexp(raw, -1) - raw[token])
            return token

        return choose

    def _judge(self, processed: torch.Tensor, trie: Trie, node: int) -> int:
        """The "fastest" sampler at one node: its drafter's draws and its other children judged
        by recursive rejection against the target's processed row (rejection.resolve)."""
        depth = trie.depths[node]
        position = len(self.produced) + depth
        token, _accepted = resolve(
            processed.reshape(-1),
            self._drawn.get(tuple(trie.path_to(node))),
            list(trie.children[node]),
            lambda j: self.rejection.uniform(position, j),
            self.noise(depth),
        )
        return token

    def _sync(self) -> None:
        if self.gen.sync_timing and self.runner.device.type == "cuda":
            torch.cuda.synchronize(self.runner.device)

    def _timed_head(self, logits, *args) -> torch.Tensor:
        """An lm_head call of the walk, its time counted as the model's (`head_s`)."""
        t = time.perf_counter()
        out = logits(*args)
        self._sync()
        self.head_s += time.perf_counter() - t
        return out

    def noise_ahead(self, k: int) -> GumbelRow:
        """The noise of the k-th token after the committed text (sampling only), for drafters."""
        return self.draws.row(len(self.produced) + k, self.gen.vocab_size)

    def noise(self, depth: int) -> GumbelRow | None:
        """The Gumbel noise of the token a node at `depth` would write (None when greedy),
        computed at the ids the draw reads."""
        if self.draws is None:
            return None
        return self.draws.row(len(self.produced) + depth, self.gen.vocab_size)

    def _choose_all(self, trie: Trie) -> list[int]:
        """Every node's choice made on the model's device and read back in the step's one
        synchronisation, with the states the drafters will read: a node's choice depends on
        its own path (and, sampling, on its depth's noise), never on the walk. Greedy rows
        go through the pipeline together; sampled and DRY rows one by one, as plain decoding
        computes them, still without a read."""
        n = len(trie)
        logits = self._timed_head(self.runner.logits_rows, list(range(n)))
        banned = max(0, self.request.min_new_tokens - len(self.produced))
        eos = sorted(self.gen.eos_ids)
        rows = [i for i in range(n) if trie.depths[i] < banned] if eos else []
        if rows:  # a node at depth d writes the step's (d + 1)-th token
            index = torch.tensor(rows, device=logits.device)[:, None]
            logits = logits.clone()  # an inference tensor of the runner's
            logits[index, torch.tensor(eos, device=logits.device)] = float("-inf")
        paths = [trie.path_to(i) for i in range(n)]
        presence = self.window.presences(paths) if self.sampling.penalty != 1.0 else None
        pipeline = self.gen.pipeline
        if self.sampling.greedy and self.sampling.dry_multiplier <= 0:
            chosen = pipeline.process(logits, presence).argmax(-1)
        else:
            dry = self.sampling.dry_multiplier > 0
            chosen = torch.stack([
                pipeline.pick(
                    pipeline.process(
                        logits[i],
                        None if presence is None else presence[i],
                        self.window.context(paths[i]) if dry else None,
                    ),
                    self.noise(trie.depths[i]),
                )
                for i in range(n)
            ])  # fmt: skip
        states = {
            kind: self.runner.features(kind, n) for kind in {s.wants_feature for s in self.readers}
        }
        states = {kind: state for kind, state in states.items() if state is not None}
        raw = logits.float()
        nats = torch.logsumexp(raw, -1) - raw.gather(-1, chosen.reshape(-1, 1)).reshape(-1)
        read = to_host(chosen, nats, *states.values())
        self._read_features = dict(zip(states, read[2:], strict=True))
        self._nats = dict(enumerate(read[1].tolist()))
        return read[0].tolist()

    def commit(self, trie: Trie, path: list[int], new: list[int], verify_s: float | None) -> None:
        """The accepted path kept in the cache, drafters fed, estimates and costs learned, the
        new tokens appended everywhere (`verify_s` None: the pass was shared by runs verified
        together, whose caller learns its cost)."""
        node = path[-1] if path else 0
        for src in self.readers:  # fused drafting: the last accepted node's state
            read = self._read_features.get(src.wants_feature)
            feature = (
                read[node] if read is not None else self.runner.feature_at(node, src.wants_feature)
            )
            if feature is not None:
                src.set_feature(feature)
        self._read_features = {}
        self.runner.compact([0] + path)
        self._judge_gated(trie, path)
        if verify_s is not None:
            self.gen.costs.observe(len(trie), verify_s)
        if self.threads is not None and verify_s is not None:
            self.threads.observe(verify_s / self.gen.costs(len(trie)))
            self.stats.threads, self.stats.threads_why = self.threads.current, self.threads.why
        self.committed.extend(new)
        self.produced.extend(new)
        self.window.extend(new)
        self._unseen.extend(new)
        if len(trie) > 1:  # a drafting step: its sources read the text now (else `_catch_up`)
            self._catch_up()

    # -- bookkeeping ---------------------------------------------------------------------------
    def record(self, trie: Trie, path: list[int], new: list[int], times: Sequence[float]):
        """The step's statistics (times: draft start, verify start, pass end, accept end,
        commit end)."""
        stats = self.stats
        by_source: Counter = Counter()
        by_depth = [0] * len(path)
        for node in path:
            by_depth[trie.depths[node] - 1] += 1
            for src in trie.sources[node]:
                stats.accepted_by_source_depth[f"{src}:{trie.depths[node]}"] += 1
            by_source["+".join(trie.sources[node])] += 1
        t_draft, t_verify, t_model, t_after, t_end = times
        step = StepStats(
            len(new),
            len(trie) - 1,
            len(path),
            dict(by_source),
            by_depth,
            t_verify - t_draft,
            t_after - t_verify,
            t_end - t_after,
            t_model - t_verify + self.head_s,
        )
        stats.add(step)
        if stats.forward_passes % STEP_LOG_EVERY == 0 and log.isEnabledFor(logging.DEBUG):
            log.debug(
                "step %d: %d tokens, tau %.2f, %.1f tokens/s, last trie %d nodes, %d accepted",
                stats.forward_passes, stats.tokens, stats.tau, stats.tokens_per_s, len(trie),
                len(path),
            )  # fmt: skip
        if self.pace is not None:
            self.pace.observe(len(new), t_end - t_draft)
            stats.plain_steps = self.pace.plain_steps
        sizes = ((src.name, src.footprint()) for src in self.sources)
        stats.source_sizes = {name: size for name, size in sizes if size}
        return step

    def finish(self, reason: str) -> None:
        self.stats.stop_reason = reason
        self.stats.quality = quality.summary(self.produced)  # once per run: cheap enough
        stats = self.stats
        log.debug(
            "run end (%s): %d tokens in %d passes, tau %.2f, %.1f tokens/s, plain steps %d",
            reason, stats.tokens, stats.forward_passes, stats.tau, stats.tokens_per_s,
            stats.plain_steps,
        )  # fmt: skip

    def stop_reason(self, new: list[int]) -> str:
        if any(t in self.gen.eos_ids for t in new):
            return "eos"
        if len(self.produced) >= self.request.max_new_tokens:
            return "length"
        stop = self.request.stop_on_text
        if stop is not None and stop(self.produced):
            return "stop_string"
        if self.gen.context.policy == "stop" and self.view.room(self.committed) < 1:
            return "context_full"
        return ""

    def _judge_gated(self, trie: Trie, path: list[int]) -> None:
        """Tell each gated source that was asked what its drafts saved this step: a pass for
        every accepted node only it proposed, less its nodes' share of the pass's extra cost."""
        if not self._gated_s:
            return
        costs = self.gen.costs
        one = costs.base or 0.0
        extra = (costs(len(trie)) - 1.0) * one
        drafted = max(1, len(trie) - 1)
        for src in self.sources:
            if id(src) not in self._gated_s:
                continue
            mine = sum(src.name in trie.sources[node] for node in range(1, len(trie)))
            alone = sum(trie.sources[node] == (src.name,) for node in path)
            self.gates[id(src)].observe(
                self._gated_s[id(src)], alone * one - extra * mine / drafted
            )

    def close(self) -> None:
        self.runner.close()


def cut_at_stop(produced, new, path, stop_on_text):
    """The step's tokens up to the first one after which `stop_on_text` holds."""
    for i in range(len(new) - 1):
        if stop_on_text(produced + new[: i + 1]):
            return new[: i + 1], path[:i]  # the cache keeps all but the last token
    return new, path

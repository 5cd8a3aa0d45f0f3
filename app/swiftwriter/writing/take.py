"""One take, from a request to its result: the one way into generation. The app's worker, its
context viewer (which shows the prompt of the take a request would run), `generate` in both
forms and a synopsis all make a TakeRequest and go through here to the same session code.

It resolves the request into a SessionPlan (`resolve`: a length in words turned into tokens
with the writer's own text, the project's stop sequences added), builds the session from it in
one call (session.session_for: a DocumentSession with prompt, story context, store, history; or
a PromptSession outside a project), measures plain decoding's speed here when asked (the
baseline of the speedup), runs the session and shapes its live statistics into `LiveStats`
snapshots, each carrying a copy of the engine's own RunStats. Callers only pass text pieces and
snapshots on (the app to its GUI thread, the CLI to stdout). Each take's settings and outcome
go to the log (logs.py), for a bug report."""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from swiftwriter.engine.decoding.settings import ContextSettings, DraftSettings, SamplingSettings
from swiftwriter.engine.decoding.stats import RunStats
from swiftwriter.heap import frozen_heap
from swiftwriter.words import SAMPLE_CHARS, WordTally, tokens_per_word
from swiftwriter.writing.baseline import (
    measure_plain,
    plain_rate,
    speedup_over_plain,
    stats_speedup,
)
from swiftwriter.writing.endings import TakeEnding
from swiftwriter.writing.guards import story_only_bans
from swiftwriter.writing.history import ProjectHistory, encoder_of
from swiftwriter.writing.plan import SessionPlan
from swiftwriter.writing.rolling import update_summary
from swiftwriter.writing.session import (
    DocumentSession,
    SessionResult,
    session_for,
    with_project_stops,
)

if TYPE_CHECKING:
    from swiftwriter.engine.decoding.events import StepEvent
    from swiftwriter.store import Project
    from swiftwriter.writing.loaded import LoadedModelLike

log = logging.getLogger(__name__)
STATS_INTERVAL_S = 0.1  # at most ten live snapshots a second: the window stays calm


@dataclass
class TakeRequest:
    """What the writer asked for: `target` tokens or words after `prompt_text` in one
    document, with the panel's settings; or, with no project, a continuation of `prompt_text`
    (or of exactly `prompt_ids`) that is stored nowhere."""

    project: Project | None  # None: a take outside a project (generate --prompt-file, a synopsis)
    doc_id: int | None
    loaded: LoadedModelLike  # a modelstore LoadedModel, or a stand-in with the same attributes
    prompt_text: str | None  # the text before the cursor; None: the whole document
    target: int = 300  # the length asked for, in `unit`
    unit: str = "tokens"  # or "words"
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    drafting: DraftSettings = field(default_factory=DraftSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    # the project's drafting history (writing.history.Histories keeps one per tokenizer), or
    # None: no drafting from the project's earlier text
    history: ProjectHistory | None = None
    measure_baseline: bool = True
    flush_interval: float = 1.0
    keep_writing: bool = False  # end-of-text forbidden before the length (then a sentence end)
    keep_to_story: bool = False  # "Keep to the story": story_sampling's bans, in the take's thread
    direction: str = ""  # what happens next
    story_mode: str = "none"  # the earlier documents the model sees: none, previous, fit
    ending: TakeEnding | None = None  # the CLI's own (stops, exact length); else from target
    prompt_ids: list[int] | None = None  # without a project: these ids exactly (a chat prompt)
    takes: int = 1  # takes written together at the spot ("Write 3 takes"): the first is shown


@dataclass
class LiveStats:
    """One snapshot of a take for the Speed dock: the engine's run so far (`run`, a copy of its
    RunStats: the one statistics type, which the engine, the stored stats and the dock share),
    and what the take adds to it: the time, the length in words and the speedup over plain
    decoding measured here (None until there is one). No field here repeats one of RunStats'."""

    phase: str  # "measuring" (the baseline), "generating", "done"
    target: int  # tokens the take should take (re-estimated for a length in words)
    run: RunStats = field(default_factory=RunStats)  # the engine's, copied at the snapshot
    elapsed_s: float = 0.0
    eta_s: float | None = None
    words: int = 0  # written so far, counted as the editor counts them
    words_target: int = 0  # the length asked in words (0: asked in tokens)
    dtype_why: str = ""  # how `auto` chose the dtype (modelstore.loader.dtype_reason), "" by hand
    plain_tokens_per_s: float | None = None
    plain_in_run: bool = False  # the rate above is this run's undrafted passes' (baseline.py)
    speedup_vs_plain: float | None = None

    @property
    def tokens(self) -> int:
        """Tokens written so far (the run's)."""
        return self.run.tokens


@dataclass
class TakeResult:
    status: str  # finished, cancelled (also before the take began)
    result: SessionResult | None  # None when cancelled while measuring the baseline
    stats: dict  # the stored stats, with the final speedup
    target: int
    summary_line: str = ""  # what the rolling summary did after the take ("" when nothing)


class Take:
    """One take: `run(should_stop)` with callbacks for text pieces (`on_text`), live
    snapshots (`on_stats`) and the measured baseline (`on_baseline`, a dict)."""

    def __init__(
        self,
        request: TakeRequest,
        on_text: Callable[[str], None] | None = None,
        on_stats: Callable[[LiveStats], None] | None = None,
        on_baseline: Callable[[dict], None] | None = None,
    ):
        self.request = request
        self.on_text = on_text
        self.words = WordTally()  # the take's words as they stream (the target re-estimated)
        self.on_stats = on_stats or (lambda s: None)
        self.on_baseline = on_baseline or (lambda b: None)
        self.plan = resolve(request)  # all the session needs, worked out before it starts
        self.session = session_for(self.plan)
        self.target = self.session.ending.target  # tokens asked for (a sentence end may add a few)
        self.plain: float | None = None
        self.dtype_why = getattr(request.loaded, "dtype_why", "")
        self._t0 = time.perf_counter()
        self._last = 0.0

    def run(self, should_stop: Callable[[], bool] | None = None) -> TakeResult:
        stop = should_stop or (lambda: False)
        # Full collections walk only the take's own objects (heap.py): a collection of the
        # whole heap stops every thread, the GUI's too, for 150 ms or more.
        with frozen_heap():
            self._keep_to_story()
            self._log_settings()
            if self.request.measure_baseline:
                self._measure(stop)
            if stop():
                log.debug("take cancelled before it began")
                return TakeResult("cancelled", None, {}, self.target)
            self._t0 = time.perf_counter()
            try:
                run = self.session.run
                if self.request.takes > 1 and isinstance(self.session, DocumentSession):
                    run = functools.partial(self.session.run_several, self.request.takes)
                result = run(should_stop=stop, on_text=self._on_text, on_step=self._on_step)
            except BaseException as exc:
                log.debug("take ended by %s: %s", type(exc).__name__, exc)
                raise
        stats = dict(result.stats)
        speedup = stats_speedup(stats)
        if speedup is not None:
            stats["speedup_vs_plain"] = round(speedup, 3)
        self.on_stats(self.snapshot(result.run, stats, final=True))
        log.debug(
            "take %s: %s tokens of %d after %s prompt tokens (%s), tau %.2f, %.1f tokens/s, "
            "%d passes, speedup %s%s",
            result.status,
            stats.get("tokens", 0),
            self.target,
            stats.get("prompt_tokens", "?"),
            stats.get("stop_reason", "?"),
            stats.get("tau", 0.0),
            stats.get("tokens_per_s", 0.0),
            stats.get("forward_passes", 0),
            stats.get("speedup_vs_plain", "unmeasured"),
            f", generation {result.generation.id}" if result.generation is not None else "",
        )
        return TakeResult(result.status, result, stats, self.target, self._summarise(result, stop))

    def _keep_to_story(self) -> None:
        """The bans of "Keep to the story", the one part of the plan resolved here, in the take's
        thread just before the run (not in the GUI's: 0.2 s on a new model): they are worked
        out from the whole built prompt, all the model reads, which only the session makes."""
        if not self.request.keep_to_story:
            return
        writers = self.session.prompt_as_text()
        self.plan = replace(self.plan, sampling=story_sampling(self.request, writers))
        self.session.sampling = self.plan.sampling

    def _summarise(self, result: SessionResult, stop: Callable[[], bool]) -> str:
        """After a take whose window slid: what slid out rolled into the document's summary
        (rolling.py), once the take is stored, so the take's own tokens never depend on it."""
        job = self.request
        if job.project is None or not result.slid_out_ids or not job.project.rolling_summary:
            return ""

        if result.status == "cancelled":
            line = "Rolling summary not updated: the take was stopped (it is as it was)"
            log.info(line)
            return line
        return update_summary(
            job.project, job.doc_id, job.loaded, result.slid_out_ids, job.context, stop
        ).line

    def _log_settings(self) -> None:
        """What a bug report needs to replay the take: model, precision, length, settings."""
        job, plan, session = self.request, self.plan, self.session
        where = "a prompt" if job.project is None else f"document {job.doc_id}"
        log.debug(
            "take on %s with %s (%s): %d tokens asked (%s %s, keep writing %s), ending %s, "
            "sampling %s, drafting %s, context %s, story %s",
            where,
            session.model_id,
            getattr(job.loaded, "precision", lambda: "?")(),
            self.target,
            job.target,
            job.unit,
            job.keep_writing,
            session.ending,
            plan.sampling,
            plan.drafting,
            plan.context,
            plan.story_mode,
        )

    def _measure(self, stop: Callable[[], bool]) -> None:
        session = self.session
        self.on_stats(LiveStats("measuring", self.target))
        model, prompt = session.baseline_inputs()
        context = len(prompt) + self.target // 2
        base = measure_plain(  # at the take's middle: its steps run from the prompt to its end
            model, prompt, self.plan.sampling, should_stop=stop, context=context
        )
        if base is not None:
            self.plain = base.tokens_per_s
            session.extra_stats.update(base.as_dict())
            self.on_baseline(base.as_dict())
            self._recheck_dtype(base.tokens_per_s, context)

    def _recheck_dtype(self, plain_tokens_per_s: float, context: int | None = None) -> None:
        """Plain decoding just timed is evidence about the remembered dtype choice: the model
        marks it stale when this contradicts it (modelstore.loader.recheck_dtype), and the
        Speed dock says so."""
        observe = getattr(self.request.loaded, "observe_plain", None)
        if observe is None or plain_tokens_per_s <= 0:
            return
        why = observe(1.0 / plain_tokens_per_s, context)
        if why:
            again = f"auto's remembered choice is measured again at the next load: {why}"
            self.dtype_why = f"{self.dtype_why}; {again}" if self.dtype_why else again
        if self.dtype_why:
            self.session.extra_stats["dtype_why"] = self.dtype_why

    def _on_text(self, piece: str) -> None:
        self.words.push(piece)
        if self.on_text is not None:
            self.on_text(piece)

    def _on_step(self, event: StepEvent) -> None:
        now = time.perf_counter()
        if now - self._last < STATS_INTERVAL_S and not event.done:
            return
        self._last = now
        self.on_stats(self.snapshot(event.run.snapshot()))  # a copy: the engine goes on

    def snapshot(self, run: RunStats, stats: dict | None = None, final: bool = False) -> LiveStats:
        """The engine's run (a live copy, or the finished run with its stored `stats` at the
        end) with the time, the ETA and the speedup over the measured plain decoding."""
        live = LiveStats("done" if final else "generating", self.target, run=run)
        live.elapsed_s = time.perf_counter() - self._t0
        live.dtype_why = self.dtype_why
        live.words, live.words_target = self.words.total, self.session.ending.words
        live.target = expected_tokens(self.target, live.words_target, run.tokens, live.words)
        rate = run.tokens_per_s
        live.eta_s = 0.0 if final else ((live.target - run.tokens) / rate if rate > 0 else None)
        stats = vars(run) if stats is None else stats  # the run's counters, as plain_rate reads
        known = {**stats, "plain_tokens_per_s": self.plain} if self.plain else stats
        plain, live.plain_in_run = plain_rate(known)
        if plain:
            live.plain_tokens_per_s = plain
            if final:
                live.speedup_vs_plain = stats_speedup(known)
            else:
                live.speedup_vs_plain = speedup_over_plain(
                    run.tokens, run.prefill_s, run.decode_s, plain
                )
        return live


ESTIMATE_WORDS = 200  # a take's own tokens per word are trusted from this many words on


def expected_tokens(target: int, words_goal: int, tokens: int, words: int) -> int:
    """The tokens a take asked in words should take: first the estimate from the writer's
    text, then from the take's own text so far (a take may spend more tokens on a word)."""
    if not words_goal or words < ESTIMATE_WORDS:
        return target
    return max(tokens, round(tokens * words_goal / words))


def resolve(request: TakeRequest) -> SessionPlan:
    """The request worked out into all its session needs (session.session_for builds it): the
    ending in tokens with the project's stop sequences, the prompt's ids fixed, the rest as
    asked ("Keep to the story"'s bans come later, in the take's thread: Take._keep_to_story)."""
    ending = ending_of(request)
    if request.project is not None:
        ending = with_project_stops(ending, request.project)
    ids = request.prompt_ids
    return SessionPlan(
        loaded=request.loaded,
        ending=ending,
        sampling=request.sampling,
        drafting=request.drafting,
        context=request.context,
        prompt_text=request.prompt_text,
        prompt_ids=None if ids is None or request.project is not None else tuple(ids),
        project=request.project,
        doc_id=request.doc_id,
        direction=request.direction,
        story_mode=request.story_mode,
        history=request.history if request.project is not None else None,
        flush_interval=request.flush_interval,
    )


def ending_of(request: TakeRequest) -> TakeEnding:
    """Where the request's take ends: the CLI's own ending, or the target in tokens (a length
    in words: the words themselves, and the tokens they should take, measured on the writer's
    own text with this tokenizer), keep writing or not."""
    if request.ending is not None:
        return request.ending
    target = max(1, int(request.target))
    words = 0
    if request.unit == "words":
        encode = encoder_of(request.loaded.tokenizer)
        words, target = (
            target,
            max(1, round(target * tokens_per_word(encode, words_sample(request)))),
        )
    ending = TakeEnding(target, words=words)
    if not request.keep_writing:
        return ending
    # the whole length: end-of-text forbidden until the tokens asked, or for a length in words
    # (which no token count marks) until the take's bound: the words then end it
    return dataclasses.replace(ending, min_new_tokens=ending.limit if words else target)


def words_sample(request: TakeRequest) -> str:
    """The writer's text that a word's tokens are measured on: before the cursor, or the
    document's end (all that is read of it)."""
    if request.prompt_text is not None or request.project is None:
        return request.prompt_text or ""
    return request.project.excerpt("document", request.doc_id, 4 * SAMPLE_CHARS).text


def story_sampling(request: TakeRequest, writers: str | None = None) -> SamplingSettings:
    """The request's sampling with "Keep to the story"'s bans added. The writer's text is the
    take's whole prompt where the caller has it (memory, notes, earlier chapters, the text,
    the direction), else the text before the cursor and the direction."""
    if writers is None:
        writers = f"{request.prompt_text or ''}\n{request.direction}"
    bans = set(request.sampling.banned_tokens) | set(story_only_bans(request.loaded, writers))
    return replace(request.sampling, banned_tokens=tuple(sorted(bans)))

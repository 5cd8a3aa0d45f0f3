"""One generation off the GUI thread: a DocumentSession run inside a QThread.

The worker never touches a widget; it speaks through queued signals (text pieces, throttled
live statistics, the measured baseline, the result or an error message), and stops between two
engine steps when asked. Any exception becomes a `failed` message: the app never crashes on a
generation."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, QThread, Signal

from swiftwriter.endings import TakeEnding
from swiftwriter.engine.settings import ContextSettings, DraftSettings, SamplingSettings
from swiftwriter.ui.baseline import measure_plain, speedup_over_plain, stats_speedup
from swiftwriter.ui.editor import count_words
from swiftwriter.ui.stoppable import StoppableWorker, start_worker

STATS_INTERVAL_S = 0.1  # at most ten live updates a second: the window stays calm
TEXT_INTERVAL_S = 0.04  # streamed text reaches the editor at most 25 times a second


class TextBatcher:
    """Joins streamed pieces and passes them on at most every TEXT_INTERVAL_S: a fast engine
    writes hundreds of pieces a second, and one editor insert per piece would queue up faster
    than the GUI thread can take them (the window would stall behind its own backlog)."""

    def __init__(self, emit):
        self.emit = emit
        self.pieces: list[str] = []
        self.last = 0.0

    def add(self, piece: str) -> None:
        self.pieces.append(piece)
        now = time.perf_counter()
        if now - self.last >= TEXT_INTERVAL_S:
            self.last = now
            self.flush()

    def flush(self) -> None:
        if self.pieces:
            text, self.pieces = "".join(self.pieces), []
            self.emit(text)


DEFAULT_TOKENS_PER_WORD = 1.4


@dataclass
class GenerationJob:
    project: object
    doc_id: int
    loaded: object  # a modelstore LoadedModel (or anything with .model/.tokenizer/.entry)
    prompt_text: str
    length: int = 300
    unit: str = "tokens"  # or "words"
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    drafting: DraftSettings = field(default_factory=DraftSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    history: object = True  # a session.ProjectHistory to reuse, True for a fresh one, or False
    measure_baseline: bool = True
    flush_interval: float = 1.0
    keep_writing: bool = False  # end-of-text forbidden before the length (then a sentence end)
    direction: str = ""  # what happens next
    story_mode: str = "none"  # the earlier documents the model sees: none, previous, fit


def tokens_per_word(encode, text: str) -> float:
    """Measured on the writer's own recent text with this tokenizer; a typical ratio if short."""
    sample = text[-4000:]
    words = count_words(sample)
    if words < 30:
        return DEFAULT_TOKENS_PER_WORD
    return max(1.0, len(encode(sample)) / words)


class GenerationWorker(StoppableWorker):
    text = Signal(str)
    stats = Signal(dict)
    baseline = Signal(dict)
    done = Signal(dict)
    what = "generation"

    def __init__(self, job: GenerationJob):
        super().__init__()
        self.job = job
        self.target_tokens = 0
        self._plain: float | None = None
        self._last_emit = 0.0
        self._t0 = 0.0

    def _run(self) -> None:
        from swiftwriter.session import DocumentSession

        job = self.job
        tokenizer = job.loaded.tokenizer
        encode = DocumentSession.encoder_for(tokenizer)
        if job.unit == "words":
            ratio = tokens_per_word(encode, job.prompt_text)
            n_tokens = max(1, round(job.length * ratio))
        else:
            n_tokens = max(1, int(job.length))
        session = DocumentSession(
            job.project,
            job.doc_id,
            job.loaded,
            sampling=job.sampling,
            drafting=job.drafting,
            max_new_tokens=n_tokens,
            ending=TakeEnding(n_tokens, min_new_tokens=n_tokens if job.keep_writing else 0),
            direction=job.direction,
            story_mode=job.story_mode,
            history=job.history,
            flush_interval=job.flush_interval,
            prompt_text=job.prompt_text,
            context=job.context,
        )
        self.target_tokens = n_tokens
        self._t0 = time.perf_counter()
        if job.measure_baseline:
            prompt = session.build_prompt()
            self.stats.emit({"phase": "measuring", "target": n_tokens})
            base = measure_plain(session.model, prompt, job.sampling, should_stop=self.should_stop)
            if base is not None:
                self._plain = base.tokens_per_s
                session.extra_stats.update(base.as_dict())
                self.baseline.emit(base.as_dict())
        if self.should_stop():
            self.done.emit({"status": "cancelled", "generation_id": None, "text": "", "stats": {}})
            return
        self._t0 = time.perf_counter()
        text = TextBatcher(self.text.emit)
        try:
            result = session.run(should_stop=self.should_stop, on_text=text.add,
                                 on_step=self._on_step)  # fmt: skip
        finally:
            text.flush()  # the last pieces reach the editor before `done`
        stats = dict(result.stats)
        speedup = stats_speedup(stats)
        if speedup is not None:
            stats["speedup_vs_plain"] = round(speedup, 3)
        self.stats.emit(self._live(stats, final=True))
        self.done.emit(
            {
                "status": result.generation.status,
                "generation_id": result.generation.id,
                "text": result.text,
                "stats": stats,
                "target": n_tokens,
            }
        )

    def _on_step(self, event) -> None:
        now = time.perf_counter()
        if now - self._last_emit < STATS_INTERVAL_S and not event.done:
            return
        self._last_emit = now
        run = event.run
        self.stats.emit(
            self._live(
                {
                    "tokens": run.tokens,
                    "tau": run.tau,
                    "tokens_per_s": run.tokens_per_s,
                    "accepted_by_source": dict(run.accepted_by_source),
                    "accepted_by_source_depth": dict(run.accepted_by_source_depth),
                    "windowed_from": run.windowed_from,
                    "decode_s": run.decode_s,
                    "prefill_s": run.prefill_s,
                    "dtype": run.dtype,
                    "invariant": run.invariant,
                }
            )
        )

    def _live(self, stats: dict, final: bool = False) -> dict:
        """What the dock shows: the engine's numbers plus elapsed, ETA and the speedup."""
        out = dict(stats)
        out["phase"] = "done" if final else "generating"
        out["target"] = self.target_tokens
        out["elapsed_s"] = time.perf_counter() - self._t0
        tokens, rate = out.get("tokens", 0), out.get("tokens_per_s", 0.0)
        out["eta_s"] = 0.0 if final else (
            (self.target_tokens - tokens) / rate if rate > 0 else None
        )  # fmt: skip
        if self._plain:
            out["plain_tokens_per_s"] = self._plain
            if final:
                speedup = stats_speedup(out)
            else:
                speedup = speedup_over_plain(tokens, out.get("prefill_s", 0.0),
                                             out.get("decode_s", 0.0), self._plain)  # fmt: skip
            if speedup is not None:
                out["speedup_vs_plain"] = speedup
        return out


def start_generation(parent: QObject, job: GenerationJob) -> tuple[QThread, GenerationWorker]:
    """Start a worker in its own QThread; the caller connects the signals it needs first-hand
    (the signals are queued to the GUI thread because the worker lives in the other thread)."""
    worker = GenerationWorker(job)
    return start_worker(parent, worker), worker

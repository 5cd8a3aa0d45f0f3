"""The session code every take goes through (take.py resolves a request into a SessionPlan,
plan.py, and `session_for` builds the session from it in one call): a prompt continued with
one model (PromptSession: `generate --prompt-file`, a synopsis), or one document of a project
continued (DocumentSession: the app, `generate PROJECT DOC`), where the project store, the
engine and the history meet.

The engine never imports the store and the store never imports torch; this module joins them.
It builds the prompt from the document (after the pinned notes), seeds the history drafting
source from the project's cache (synchronised incrementally, never rebuilt per call), streams
the output into a GenerationRecord (so a crash loses at most a second), and appends the text to
the document in the same transaction that closes the generation."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

from swiftwriter.chat_template import has_chat_template, template_ids
from swiftwriter.engine.decoding.generator import (
    Generator,
    StepEvent,
    context_length,
    vocab_size_of,
)
from swiftwriter.engine.decoding.history_source import HistorySource
from swiftwriter.engine.decoding.settings import ContextSettings, DraftSettings, SamplingSettings
from swiftwriter.engine.decoding.stats import RunStats
from swiftwriter.engine.decoding.textgen import eos_ids_of
from swiftwriter.errors import UserError
from swiftwriter.store import Document, Generation, Project, ProjectError
from swiftwriter.store.texts import Excerpt
from swiftwriter.writing.context import STORY_MODES, Reader, StoryContext, assemble, fitted
from swiftwriter.writing.endings import TakeEnding, parse_stops
from swiftwriter.writing.guards import TakeStream
from swiftwriter.writing.history import ProjectHistory, encoder_of, tokenizer_identity
from swiftwriter.writing.plan import SessionPlan

if TYPE_CHECKING:
    import torch


class PromptTooLong(UserError):
    """A prompt longer than the model's context, refused before the take (the caller names
    where it came from)."""


@dataclass
class SessionResult:
    status: str  # finished, cancelled
    generation: Generation | None  # the stored record; None for a take outside a project
    document: Document | None
    text: str
    token_ids: list[int]
    stats: dict = field(default_factory=dict)
    # the document's text (and the take's) that slid out of the window during the take: what
    # the rolling summary is written from (rolling.py); empty when the window never slid
    slid_out_ids: list[int] = field(default_factory=list)
    # takes written together with this one (DocumentSession.run_several), stored beside it
    others: list[Generation] = field(default_factory=list)
    # the engine's own statistics of the run (of the first take, for takes written together):
    # `stats` is their stored form, with what the session adds (history, the baseline)
    run: RunStats = field(default_factory=RunStats)


DEFAULT_TARGET = 256  # tokens, when a caller names no ending (scripts, benchmarks)


class PromptSession:
    """One take with one model: the decoding every take shares (the app's, `generate` in both
    forms, a synopsis). On its own it continues `prompt_text`, or exactly `prompt_ids` (a
    synopsis's chat prompt), and stores nothing; DocumentSession adds the project (the story
    context, the history, the stored record).

    `loaded` is a modelstore LoadedModel; tests pass `model` and `tokenizer` instead (any
    tokenizer with HF's `encode(text, add_special_tokens=False)` and
    `decode(ids, skip_special_tokens=True)`). `ending` says where the take ends: its `target` is
    the length asked for, in tokens (default: exactly DEFAULT_TARGET, or fewer at end-of-text).
    `extra_stats` is merged into the take's stats (the app adds its measured baseline)."""

    def __init__(
        self,
        loaded=None,
        *,
        model=None,
        tokenizer=None,
        model_id: str | None = None,
        sampling: SamplingSettings | None = None,
        drafting: DraftSettings | None = None,
        drafter=None,
        context: ContextSettings | None = None,
        ending: TakeEnding | None = None,
        prompt_text: str | None = None,
        prompt_ids: list[int] | None = None,
    ):
        if loaded is not None:
            drafter = drafter if drafter is not None else getattr(loaded, "drafter", None)
            model = model or loaded.model
            tokenizer = tokenizer or loaded.tokenizer
            model_id = model_id or loaded.entry.id
        if model is None or tokenizer is None:
            raise UserError("A generation needs a model and its tokenizer")
        self.ending = ending or TakeEnding.exact(DEFAULT_TARGET)
        target = self.ending.target
        if isinstance(target, bool) or not isinstance(target, int):
            raise UserError(f"A take's length is a whole number of tokens, not {target!r}")
        if target < 1:
            raise UserError(f"A take must ask for at least 1 token, not {target}")
        self.model, self.tokenizer = model, tokenizer
        self.model_id = (
            model_id or getattr(getattr(model, "config", None), "name_or_path", "") or "model"
        )
        self.sampling = sampling or SamplingSettings()
        self.drafting = drafting if drafting is not None else DraftSettings()
        self.drafter = drafter
        self.context = context or ContextSettings()
        self.prompt_text = prompt_text
        self.prompt_ids = prompt_ids
        self.extra_stats: dict = {}
        self.encode = encoder_of(tokenizer)

    @classmethod
    def from_plan(cls, plan: SessionPlan) -> PromptSession:
        """The session a resolved plan describes (outside a project: session_for)."""
        return cls(plan.loaded, prompt_ids=plan.prompt_ids, **_settings_of(plan))

    def window(self) -> int | None:
        """The tokens the model sees at once: its context, or the take's context limit."""
        return self.context.window(context_length(self.model.config))

    # -- the prompt -------------------------------------------------------------------------
    def build_prompt(self) -> list[int]:
        """The ids the engine receives."""
        pinned, rest = self.prompt_parts()
        return pinned + rest

    def prompt_as_text(self) -> str:
        """The whole prompt as text: all the model reads before the take."""
        return self.decode(self.build_prompt())

    def baseline_inputs(self) -> tuple[torch.nn.Module, list[int]]:
        """What plain decoding's baseline is timed with (take.Take._measure): the model, and
        the prompt the take will continue."""
        return self.model, self.build_prompt()

    def prompt_parts(self) -> tuple[list[int], list[int]]:
        """(ids a sliding window keeps, the rest): outside a project nothing is pinned."""
        ids = list(self.prompt_ids) if self.prompt_ids is not None else self._text_prompt()
        return [], ids or [self._bos()]

    def _text_prompt(self) -> list[int]:
        """`prompt_text`'s ids, read and tokenized only as far as the model's context: a
        prompt as long as the context is refused under the "stop" policy (PromptTooLong,
        known from its end alone), and reaches the engine by its end under "slide"."""
        limit = self.window()
        fit = fitted(self.encode, self.prompt_text or "", limit or (1 << 30))
        if limit is not None and fit.total >= limit and self.context.policy == "stop":
            tokens = f"about {fit.total:,}" if fit.cut else f"{fit.total:,}"
            raise PromptTooLong(
                f"the prompt has {tokens} tokens but the model's context holds {limit:,}: "
                "shorten it (or choose the sliding-window policy)"
            )
        return fit.ids

    def _bos(self) -> int:
        bos = getattr(self.tokenizer, "bos_token_id", None)
        return bos if isinstance(bos, int) else 0

    # -- the run ----------------------------------------------------------------------------
    def run(
        self,
        should_stop: Callable[[], bool] | None = None,
        on_text: Callable[[str], None] | None = None,
        on_step: Callable[[StepEvent], None] | None = None,
    ) -> SessionResult:
        """Generate; returns what happened (nothing is stored). `on_step` sees every engine
        step (live statistics), after its text went to `on_text`."""
        pinned, rest = self.prompt_parts()
        generator = self._generator()
        pieces: list[str] = []
        produced = self._stream(
            generator,
            pinned + rest,
            pinned,
            lambda piece, ids: pieces.append(piece),
            should_stop,
            on_text,
            on_step,
        )
        stats = {**generator.stats.as_dict(), **self.extra_stats}
        status = self._status(generator)
        text = "".join(pieces)
        return SessionResult(status, None, None, text, produced, stats, run=generator.stats)

    def _generator(self, sources: list | None = None) -> Generator:
        return Generator(
            self.model,
            self.sampling,
            self.drafting,
            sources=sources or [],
            eos_ids=eos_ids_of(self.tokenizer, self.model),
            drafter=self.drafter,
            context=self.context,
        )

    def _stream(
        self,
        generator: Generator,
        prompt: list[int],
        pinned: list[int],
        keep: Callable[[str, tuple], None],
        should_stop: Callable[[], bool] | None,
        on_text: Callable[[str], None] | None,
        on_step: Callable[[StepEvent], None] | None,
    ) -> list[int]:
        """Decode the take: each text piece with its ids to `keep` (the record, or a list),
        then to `on_text`; every step to `on_step`. Returns the ids written."""
        take = TakeStream(self, prompt, keep, on_text, on_step)

        def stop() -> bool:
            return take.lost or (should_stop is not None and should_stop())

        events = generator.generate(
            prompt,
            self.ending.limit,
            should_stop=stop,
            stop_on_text=self.ending.checker(self.decode),
            pinned_ids=pinned,
            min_new_tokens=self.ending.min_new_tokens,
        )
        for event in events:
            take.push(event)
        take.finish(generator.stats)
        return take.produced

    def _stream_several(
        self,
        generator: Generator,
        prompt: list[int],
        pinned: list[int],
        keeps: list[Callable[[str, tuple], None]],
        should_stop: Callable[[], bool] | None,
        on_text: Callable[[str], None] | None,
        on_step: Callable[[StepEvent], None] | None,
    ) -> list[list[int]]:
        """As `_stream`, for takes written together (one per `keeps`, each with its own seed,
        engine.decoding.together): the first streams to `on_text` and `on_step`, the others
        only to their own `keep`. A take that breaks down stops being kept; the others go on."""
        takes = [TakeStream(self, prompt, keeps[0], on_text, on_step)]
        takes += [TakeStream(self, prompt, keep, None, None) for keep in keeps[1:]]

        def stop() -> bool:
            return all(t.lost for t in takes) or (should_stop is not None and should_stop())

        seed = self.sampling.seed  # a fixed seed: the takes take it and the next ones
        seeds = [None if seed is None else seed + i for i in range(len(keeps))]
        events = generator.generate_together(
            prompt,
            self.ending.limit,
            seeds,
            should_stop=stop,
            stop_on_text=self.ending.checker(self.decode),
            pinned_ids=pinned,
            min_new_tokens=self.ending.min_new_tokens,
        )
        for side in events:
            if not takes[side.index].lost:
                takes[side.index].push(side.event)
        for i, take in enumerate(takes):
            take.finish(generator.together_stats[i])
        return [take.produced for take in takes]

    @staticmethod
    def _status(generator: Generator) -> str:
        return "cancelled" if generator.stats.stop_reason == "cancelled" else "finished"

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)


class DocumentSession(PromptSession):
    """Continue one document of an open project: the prompt is its story context (memory,
    pinned notes, lorebook, earlier documents by `story_mode`, the text, the direction), the
    project's history drafts, the take streams into a stored record and is appended to the
    document.

    `prompt_text` replaces the document's text in the prompt (the app passes the text before
    the cursor). `context` says what happens at the model's context limit (stop, or slide a
    window that keeps the pinned notes); the prompt is cut the same way for both. The other
    arguments are PromptSession's."""

    def __init__(
        self,
        project: Project,
        doc_id: int,
        loaded=None,
        *,
        tokenizer_id: str | None = None,
        history: ProjectHistory | None = None,  # None: no drafting from the project's texts
        use_notes: bool = True,
        flush_interval: float = 1.0,
        direction: str = "",
        story_mode: str = "none",
        **session,
    ):
        if project.readonly:
            raise ProjectError(f"{project.path.name} is read-only here ({project.readonly_reason})")
        self.document = project.document(doc_id, texts=False)  # a missing one fails first
        super().__init__(loaded, **session)
        self.ending = with_project_stops(self.ending, project)
        self.project, self.doc_id = project, doc_id
        self.tokenizer_id = tokenizer_id or tokenizer_identity(self.tokenizer)
        self.use_notes = use_notes
        self.flush_interval = flush_interval
        if story_mode not in STORY_MODES:
            raise UserError(
                f"The story context is one of {', '.join(STORY_MODES)}, not {story_mode!r}"
            )
        self.story_mode = story_mode
        self.direction = direction
        if history is not None and not isinstance(history, ProjectHistory):
            raise TypeError(f"history is a ProjectHistory or None, not {history!r}")
        self.history = history

    @classmethod
    def from_plan(cls, plan: SessionPlan) -> DocumentSession:
        """The session a resolved plan with a project describes (session_for)."""
        if plan.project is None or plan.doc_id is None:
            raise UserError("A document's take needs its project and document")
        return cls(
            plan.project,
            plan.doc_id,
            plan.loaded,
            history=plan.history,
            flush_interval=plan.flush_interval,
            direction=plan.direction,
            story_mode=plan.story_mode,
            **_settings_of(plan),
        )

    # -- the prompt -------------------------------------------------------------------------
    def story_context(self) -> StoryContext:
        """Memory, pinned notes and the lorebook entries that fire, the earlier documents (by
        `story_mode`), the text before the cursor with the standing author's note, and the
        direction, within the model's context less the take's room. Stored texts are read only
        as far as the window can use (`context.fitted`)."""
        limit = self.window()
        budget = 1 << 30
        if limit is not None:
            budget = limit - min(self.ending.limit, limit // 2) - 1
            if budget < 1:
                raise UserError(f"The model's context ({limit} tokens) leaves no room for a prompt")
        text = self.prompt_text if self.prompt_text is not None else self._stored("document")
        story = []
        if self.story_mode != "none":
            for doc in self.project.documents(texts=False):
                if doc.id == self.doc_id:
                    break
                story.append((doc.title, self._stored("document", doc.id),
                              self._stored("synopsis", doc.id)))  # fmt: skip
        built = assemble(
            self.encode,
            budget,
            self._memory_and_notes(),
            story,
            text,
            self.direction,
            self.story_mode,
            chat=chat_template_of(self.tokenizer),
            decode=self.decode,
            lore=self.project.lorebook(),
            note=self.project.authors_note,
            summary=self.project.summary(self.doc_id).text if self.project.rolling_summary else "",
        )
        if not built.ids:
            built.ids = [self._bos()]
        return built

    def _stored(self, kind: str, number: int | None = None) -> Reader:
        """A stored text (this document's where no number is given), read as far as asked."""
        number = self.doc_id if number is None else number
        return lambda limit, end: self.project.excerpt(kind, number, limit, end)

    def _memory_and_notes(self) -> Reader:
        """The memory, then the pinned notes (title and text), as one text read from its start
        as far as asked (the context keeps its beginning, whatever `end` says): each part
        stripped, a blank one left out, a blank line after each."""
        notes = self.project.pinned_notes(texts=False) if self.use_notes else []
        parts = [("memory", 0, "")] + [("note", n.id, n.title) for n in notes]

        def read(limit: int, end: bool = False) -> Excerpt:
            blocks, used, size = [], 0, 0
            for kind, number, title in parts:
                part = self.project.excerpt(kind, number, max(0, limit - used), end=False)
                size += part.size
                if used >= limit:
                    continue  # only its size: beyond what was asked for
                used += part.read
                block = f"{title}\n{part.text}" if title else part.text
                block = block.strip() if part.whole else block.lstrip()
                if block:
                    blocks.append(block + ("\n\n" if part.whole else ""))
            return Excerpt("".join(blocks), used, size)

        return read

    def prompt_parts(self, built: StoryContext | None = None) -> tuple[list[int], list[int]]:
        """(ids a sliding window keeps: memory and pinned notes, at most half the window;
        the rest of the prompt)."""
        built = built or self.story_context()
        pinned = built.pinned
        limit = self.window()
        if self.context.policy == "slide" and limit is not None:
            pinned = min(pinned, limit // 2)
        return built.ids[:pinned], built.ids[pinned:]

    # -- the run ----------------------------------------------------------------------------
    def run(
        self,
        should_stop: Callable[[], bool] | None = None,
        on_text: Callable[[str], None] | None = None,
        on_step: Callable[[StepEvent], None] | None = None,
    ) -> SessionResult:
        """Generate, stream into the store, append to the document; returns what happened.
        `on_step` sees every engine step (live statistics), after its text went to `on_text`.

        Cancelled (by `should_stop` or Ctrl-C): the text so far is still appended. Failed: the
        text so far stays in the generation's record, the document is unchanged."""
        built = self.story_context()
        note_ids, doc_ids = self.prompt_parts(built)
        prompt = note_ids + doc_ids
        history_source, history_stats = self._history_source()
        generator = self._generator([history_source] if history_source is not None else [])
        record = self._open_record(prompt, built)
        try:
            produced = self._stream(
                generator, prompt, note_ids, record.append, should_stop, on_text, on_step
            )
        except BaseException as exc:
            self._close_failed([record], exc, lambda i: generator.stats, history_source,
                               history_stats)  # fmt: skip
            raise
        generation, stats = self._close(record, generator.stats, history_source, history_stats)
        document = self.project.document(self.doc_id) if generation.applied else None
        slid = slid_out_of(built, prompt, produced, generator.stats.slid_out)
        status = self._status(generator)
        text = generation.text
        return SessionResult(status, generation, document, text, produced, stats, slid,
                             run=generator.stats)  # fmt: skip

    def run_several(
        self,
        count: int,
        should_stop: Callable[[], bool] | None = None,
        on_text: Callable[[str], None] | None = None,
        on_step: Callable[[StepEvent], None] | None = None,
    ) -> SessionResult:
        """`count` takes at the same spot written together (one model pass per step for all,
        each with its own seed: engine.decoding.together). The first is the take `run` writes
        (streamed, appended to the document); the others are stored as generations of the
        document beside it (`SessionResult.others`), for the writer to swap in."""
        if count < 2:
            return self.run(should_stop, on_text, on_step)
        built = self.story_context()
        note_ids, doc_ids = self.prompt_parts(built)
        prompt = note_ids + doc_ids
        history_source, history_stats = self._history_source()
        generator = self._generator([history_source] if history_source is not None else [])
        records = [self._open_record(prompt, built) for _ in range(count)]
        keeps = [record.append for record in records]
        try:
            produced = self._stream_several(
                generator, prompt, note_ids, keeps, should_stop, on_text, on_step
            )
        except BaseException as exc:
            self._close_failed(records, exc, generator.together_stats.get, history_source,
                               history_stats)  # fmt: skip
            raise
        closed = [
            self._close(
                record, generator.together_stats[i], history_source, history_stats, append=i == 0
            )  # fmt: skip
            for i, record in enumerate(records)
        ]
        (generation, stats), others = closed[0], [gen for gen, _ in closed[1:]]
        document = self.project.document(self.doc_id) if generation.applied else None
        slid = slid_out_of(built, prompt, produced[0], generator.together_stats[0].slid_out)
        status = "cancelled" if stats.get("stop_reason") == "cancelled" else "finished"
        text = generation.text
        return SessionResult(status, generation, document, text, produced[0], stats, slid, others,
                             generator.together_stats[0])  # fmt: skip

    def _history_source(self) -> tuple[HistorySource | None, dict]:
        """The project history's drafting source for this take (None without history), and
        its statistics so far."""
        if self.history is None:
            return None, {}
        index = self.history.refresh(vocab_size_of(self.model))
        return HistorySource(index), {"tokens": len(index), **self.history.timings}

    def _open_record(self, prompt: list[int], built: StoryContext):
        return self.project.start_generation(
            self.doc_id,
            hashlib.sha256(str(prompt).encode()).hexdigest()[:32],
            self.model_id,
            self.tokenizer_id,
            {**self._settings(len(prompt)), "context_given": built.render()[:CONTEXT_KEPT]},
            flush_interval=self.flush_interval,
        )

    def _close(self, record, run_stats, source, history: dict, append: bool = True):
        """A take's record finished (its text appended to the document when `append`), the
        history told of it: (the stored Generation, its stats)."""
        stats = {**self._run_stats(run_stats, source, history), **self.extra_stats}
        status = "cancelled" if run_stats.stop_reason == "cancelled" else "finished"
        generation = record.finish(status, stats, append_to_document=append)
        if self.history is not None:
            self.history.add_generation(self.project.generation(generation.id))
        return generation, stats

    def _close_failed(self, records, exc: BaseException, stats_of, source, history) -> None:
        """Takes that ended by an exception: Ctrl-C keeps the first take's text so far in the
        document (cancelled), anything else leaves the document as it was (failed)."""
        cancelled = isinstance(exc, KeyboardInterrupt)
        for i, record in enumerate(records):
            run_stats = stats_of(i)
            stats = self._run_stats(run_stats, source, history) if run_stats is not None else {}
            record.finish(
                "cancelled" if cancelled else "failed",
                {**stats, **self.extra_stats},
                error=None if cancelled else f"{type(exc).__name__}: {exc}",
                append_to_document=cancelled and i == 0,
            )

    def _settings(self, prompt_tokens: int) -> dict:
        drafting = asdict(self.drafting)
        return {
            "sampling": asdict(self.sampling),
            "drafting": drafting,
            "history": self.history is not None,
            "pinned_notes": self.use_notes,
            "context": asdict(self.context),
            "prompt_tokens": prompt_tokens,
            "ending": asdict(self.ending),
            "story_context": self.story_mode,
            "direction": self.direction,
            # where the take goes back if the app stops mid-take (store.recovery_point)
            "written_after": self._written_after(),
        }

    def _written_after(self) -> str:
        """The end of the text the take follows (a take without a cursor goes last)."""
        if self.prompt_text is not None:
            return self.prompt_text[-WRITTEN_AFTER:]
        end = self.project.excerpt("document", self.doc_id, 4 * WRITTEN_AFTER).text
        return end[-WRITTEN_AFTER:]  # 4 bytes at most a character

    @staticmethod
    def _run_stats(run_stats, source: HistorySource | None, history: dict) -> dict:
        stats = run_stats.as_dict()
        if source is not None:
            stats["history"] = {**history, "proposed": source.proposed, "deferred": source.deferred}
        return stats


def session_for(plan: SessionPlan) -> PromptSession:
    """The one way from a resolved plan to its session: a DocumentSession for a take in a
    project, else a PromptSession."""
    if plan.project is None:
        return PromptSession.from_plan(plan)
    return DocumentSession.from_plan(plan)


def _settings_of(plan: SessionPlan) -> dict:
    """What every session takes from a plan: the decoding settings, the ending, the text."""
    return dict(
        sampling=plan.sampling,
        drafting=plan.drafting,
        context=plan.context,
        ending=plan.ending,
        prompt_text=plan.prompt_text,
    )


def with_project_stops(ending: TakeEnding, project: Project) -> TakeEnding:
    """The ending with the project's own stop sequences added (once: a plan's ending may have
    them already, take.resolve)."""
    stops = tuple(s for s in parse_stops(project.stop_sequences) if s not in ending.stops)
    return replace(ending, stops=ending.stops + stops) if stops else ending


def slid_out_of(built: StoryContext, prompt: list[int], produced: list[int], span) -> list[int]:
    """The ids of the document's text and the take's that the window left behind: the engine's
    `slid_out` span of prompt + output, less what came before this document's text (memory,
    lore, the summary, earlier documents: each has its own place)."""
    if not span:
        return []
    text_ids = next((len(p.ids) for p in built.parts if p.name == "text"), 0)
    start = max(int(span[0]), len(prompt) - text_ids)
    return (prompt + produced)[start : int(span[1])]


CONTEXT_KEPT = 200_000  # characters of the rendered context kept with a take (History shows it)
WRITTEN_AFTER = 200  # characters of text before a take kept with it, to find its place again


def chat_template_of(tokenizer) -> Callable[[list[dict]], list[int]] | None:
    """messages -> ids through the tokenizer's chat template (the last message continued),
    or None for a tokenizer without one."""
    if not has_chat_template(tokenizer):
        return None
    return lambda messages: template_ids(tokenizer, messages, continue_final_message=True)


def generate_into_document(
    project: Project,
    doc_id: int,
    loaded=None,
    *,
    should_stop: Callable[[], bool] | None = None,
    on_text: Callable[[str], None] | None = None,
    on_step: Callable[[StepEvent], None] | None = None,
    **kwargs,
) -> SessionResult:
    """One call for scripts and tests: see DocumentSession for the other arguments."""
    session = DocumentSession(project, doc_id, loaded, **kwargs)
    return session.run(should_stop=should_stop, on_text=on_text, on_step=on_step)

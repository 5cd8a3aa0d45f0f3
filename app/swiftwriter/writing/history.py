"""A project's drafting history, which the writing layer owns: `ProjectHistory`, the n-gram
index of one project's texts for one tokenizer (loaded from the project's cache and kept in step
with what changed since), and `Histories`, the open project's histories by tokenizer, which the
window holds and asks before a take starts (so the take's request carries a history, or None,
already resolved)."""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from swiftwriter.engine.decoding.history_source import SENT, HistoryIndex
from swiftwriter.engine.decoding.textgen import encode
from swiftwriter.store import Generation, Project
from swiftwriter.store.history import HISTORY_TAKE_TOKENS

if TYPE_CHECKING:
    from swiftwriter.writing.loaded import LoadedModelLike

log = logging.getLogger(__name__)

HISTORY_KINDS = ("g", "d", "n")  # generations, documents, notes


def tokenizer_identity(tokenizer) -> str:
    """A stable id for a tokenizer's vocabulary: models sharing a tokenizer share history."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        digest = hashlib.blake2b(backend.to_str().encode("utf-8"), digest_size=10).hexdigest()
        return f"hf-{digest}"
    explicit = getattr(tokenizer, "identity", None)
    if isinstance(explicit, str) and explicit:
        return explicit
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    return f"{name}:{len(tokenizer) if hasattr(tokenizer, '__len__') else 0}"


def encoder_of(tokenizer) -> Callable[[str], list[int]]:
    """Text -> ids without special tokens: how documents enter the prompt and the history."""
    return functools.partial(encode, tokenizer)


class ProjectHistory:
    """A project's drafting history for one tokenizer: loaded from the project's cache and
    brought up to date with what changed since (new generations, edited documents and notes).
    Keep one per open project and tokenizer to skip even the loading between generations."""

    def __init__(
        self, project: Project, tokenizer_id: str, tokenize: Callable[[str], list[int]] | None
    ):
        self.project = project
        self.tokenizer_id = tokenizer_id
        self.tokenize = tokenize
        self.index: HistoryIndex | None = None
        self.timings: dict[str, float] = {}

    @classmethod
    def of(cls, project: Project, tokenizer) -> ProjectHistory:
        """A fresh history of the project for this tokenizer (documents and notes included)."""
        return cls(project, tokenizer_identity(tokenizer), encoder_of(tokenizer))

    def refresh(self, vocab_size: int | None = None) -> HistoryIndex:
        """The index brought up to date; a stored cache that does not hold together (or holds
        ids at or beyond `vocab_size`, the model's) is rebuilt, and a recorded text whose ids
        lie beyond it is left out, each said in one line."""
        t0 = time.perf_counter()
        if self.index is None:
            self.index = self._load(vocab_size)
        t1 = time.perf_counter()
        index = self.index
        current = self.project.history_fingerprints(
            self.tokenizer_id, documents=self.tokenize is not None
        )
        covered = HISTORY_KINDS if self.tokenize is not None else ("g",)
        for key in list(index.sources):
            if key[:1] in covered and key not in current:
                index.discard(key, settle=False)
        bound = min(vocab_size or SENT, SENT)
        beyond: list[int] = []
        for key, fingerprint in current.items():
            if index.sources.get(key, {}).get("fp") != fingerprint:
                tokens = self.project.history_tokens(key, self.tokenize)
                if tokens and max(tokens) >= bound:
                    beyond.append(max(tokens))
                    index.set_aside(key, fingerprint, settle=False)
                else:
                    index.update(key, fingerprint, tokens, settle=False)
        index.settle()
        if beyond:
            log.warning("%s: %d recorded texts hold token ids beyond the model's vocabulary (up "
                        "to %s, of %s): left out of the drafting history", self.project.path.name,
                        len(beyond), f"{max(beyond):,}", f"{bound:,}")  # fmt: skip
        t2 = time.perf_counter()
        self._save()
        self.timings = {
            "load_s": round(t1 - t0, 4),
            "sync_s": round(t2 - t1, 4),
            "save_s": round(time.perf_counter() - t2, 4),
        }
        return index

    def _load(self, vocab_size: int | None) -> HistoryIndex:
        """The stored cache, checked through; a fresh index where there is none or it does
        not hold together (said in one line: it is rebuilt from the project's texts)."""
        parts = self.project.load_ngram_cache(self.tokenizer_id)
        index, wrong = HistoryIndex.restore(parts, vocab_size) if parts else (None, "")
        if wrong:
            log.warning("%s: the drafting cache does not hold together (%s): rebuilt",
                        self.project.path.name, wrong)  # fmt: skip
        return index or HistoryIndex()

    def add_generation(self, generation: Generation) -> None:
        """Index one closed generation right away (cheap: it goes to the delta tier)."""
        if self.index is None or not generation.token_ids:
            return
        tokens = generation.token_ids[-HISTORY_TAKE_TOKENS:]  # as the store reads it back
        self.index.update(f"g{generation.id}", f"n{generation.n_tokens}", tokens)
        self._save()

    def _save(self) -> None:
        if self.index is not None and not self.project.readonly:
            parts = self.index.to_parts()
            if parts:
                self.project.save_ngram_cache(self.tokenizer_id, parts)


class Histories:
    """The open project's drafting histories, one per tokenizer, kept between takes so that
    each take only brings its history up to date. The window holds one per open project and
    asks it for the loaded model's before a take starts."""

    def __init__(self, project: Project):
        self.project = project
        self._by_tokenizer: dict[str, ProjectHistory] = {}

    def for_model(self, loaded: LoadedModelLike) -> ProjectHistory:
        key = tokenizer_identity(loaded.tokenizer)
        if key not in self._by_tokenizer:
            self._by_tokenizer[key] = ProjectHistory.of(self.project, loaded.tokenizer)
        return self._by_tokenizer[key]

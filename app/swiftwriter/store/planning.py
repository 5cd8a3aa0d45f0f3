"""The writer's plan, kept in the project's metadata (so it travels with the file): word
targets (one for the whole project, one per document; 0 means none) and each document's
status (draft, revised, final)."""

from __future__ import annotations

import json

from swiftwriter.store.records import ProjectError
from swiftwriter.words import count_words

MAX_TARGET = 10_000_000
STATUSES = ("", "draft", "revised", "final")


def _checked(words) -> int:
    try:
        value = int(words)
    except (TypeError, ValueError):
        raise ProjectError(f"A word target is a whole number, not {words!r}") from None
    if not 0 <= value <= MAX_TARGET:
        raise ProjectError(f"A word target lies between 0 and {MAX_TARGET:,}, not {value:,}")
    return value


def project_target(project) -> int:
    try:
        return _checked(project.meta.get("word_target", 0))
    except ProjectError:
        return 0  # a damaged value means no target, never a failure to open


def set_project_target(project, words) -> None:
    project.update_meta(word_target=str(_checked(words)))


def document_targets(project) -> dict[int, int]:
    try:
        raw = json.loads(project.meta.get("document_targets", "{}"))
        return {int(k): _checked(v) for k, v in raw.items() if _checked(v)}
    except (ValueError, AttributeError, ProjectError):
        return {}


def set_document_target(project, doc_id: int, words) -> None:
    targets = document_targets(project)
    value = _checked(words)
    if value:
        targets[int(doc_id)] = value
    else:
        targets.pop(int(doc_id), None)
    project.update_meta(document_targets=json.dumps({str(k): v for k, v in targets.items()}))


def statuses(project) -> dict[int, str]:
    try:
        raw = json.loads(project.meta.get("document_status", "{}"))
        return {int(k): v for k, v in raw.items() if v in STATUSES and v}
    except (ValueError, AttributeError):
        return {}


def set_status(project, doc_id: int, status: str) -> None:
    if status not in STATUSES:
        raise ProjectError(f"Unknown status '{status}' (use {', '.join(s for s in STATUSES if s)})")
    current = statuses(project)
    if status:
        current[int(doc_id)] = status
    else:
        current.pop(int(doc_id), None)
    project.update_meta(document_status=json.dumps({str(k): v for k, v in current.items()}))


def words_with_what_is_below(documents) -> dict[int, int]:
    """Each document's words with those of every document below it (a chapter counts its
    scenes), from `documents` in the project's depth-first order (children after parents)."""
    totals = {doc.id: count_words(doc.text) for doc in documents}
    for doc in reversed(documents):
        if doc.parent_id in totals:
            totals[doc.parent_id] += totals[doc.id]
    return totals

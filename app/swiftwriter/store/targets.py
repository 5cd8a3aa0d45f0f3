"""Word targets: one for the whole project and one per document, kept in the project's
metadata (so they travel with the file). 0 means no target."""

from __future__ import annotations

import json

from swiftwriter.store.records import ProjectError

MAX_TARGET = 10_000_000


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

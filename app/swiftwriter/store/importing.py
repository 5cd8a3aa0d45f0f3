"""Imported sections become a tree of documents in a project.

Reading files is the importers' job (export/importers.py: Markdown, text, Word); they give
(level, title, markdown) sections, and this module turns levels into a tree and kinds, in one
transaction."""

from __future__ import annotations

from collections.abc import Iterable

from swiftwriter.store.records import Document, ProjectError

KINDS_BY_DEPTH = {1: ("chapter",), 2: ("part", "chapter"), 3: ("part", "chapter", "scene")}


def import_sections(
    project, sections: Iterable[tuple[int, str, str]], parent_id: int | None = None
) -> list[Document]:
    """Add the sections as documents (one transaction: all of them or none)."""
    sections = [(max(1, int(lv)), (t or "").strip() or "Untitled", b) for lv, t, b in sections]
    if not sections:
        raise ProjectError("Nothing to import: the file has no text")
    levels = sorted({lv for lv, _, _ in sections})
    kinds = KINDS_BY_DEPTH.get(len(levels), ("part", "chapter", "scene"))
    kind_of = {lv: kinds[i] if i < len(kinds) else "section" for i, lv in enumerate(levels)}
    added: list[Document] = []
    with project.batch():
        stack: list[tuple[int, int | None]] = [(0, parent_id)]
        for level, title, body in sections:
            while len(stack) > 1 and stack[-1][0] >= level:
                stack.pop()
            doc = project.add_document(title, body, parent_id=stack[-1][1], kind=kind_of[level])
            stack.append((level, doc.id))
            added.append(doc)
    return added

"""Bring Markdown or plain text files into a project as a tree of documents.

Readers give (level, title, markdown) sections; this module turns levels into a tree and
kinds. Word files and other formats come from `swiftwriter.export.importers.import_file` when
that module is present: any reader with that shape plugs in here unchanged."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from pathlib import Path

from swiftwriter.store.records import Document, ProjectError

_HEADING = re.compile(r"^(#{1,6})[ \t]+(?=\S)")  # the title is cut by string methods
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
KINDS_BY_DEPTH = {1: ("chapter",), 2: ("part", "chapter"), 3: ("part", "chapter", "scene")}


def parse_markdown(text: str, fallback_title: str) -> list[tuple[int, str, str]]:
    """ATX headings (outside code fences) start sections; text before the first heading
    becomes a section named `fallback_title`."""
    sections: list[tuple[int, str, list[str]]] = []
    current: tuple[int, str, list[str]] | None = None
    fence: str | None = None
    for line in text.splitlines():
        marker = _FENCE.match(line)
        if marker:
            token = marker.group(1)[0]
            fence = None if fence == token else (fence or token)
        heading = None if fence or marker else _HEADING.match(line)
        title = line[heading.end() :].rstrip(" \t").rstrip("#").strip() if heading else ""
        if heading and title:
            current = (len(heading.group(1)), title, [])
            sections.append(current)
        else:
            if current is None:
                if not line.strip():
                    continue
                current = (1, fallback_title, [])
                sections.append(current)
            current[2].append(line)
    return [(level, title, "\n".join(body).strip("\n")) for level, title, body in sections]


def read_sections(path: Path) -> list[tuple[int, str, str]]:
    """Sections of a .md or .txt file, or of anything the export package can import."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ProjectError(f"No such file: {path}")
    suffix = path.suffix.lower()
    importer = _external_importer()
    if importer is not None:
        return [_as_tuple(item) for item in importer(path)]
    if suffix not in (".md", ".markdown", ".txt"):
        raise ProjectError(f"Cannot import {path.name}: use a .md or .txt file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ProjectError(f"{path.name} is not UTF-8 text") from exc
    except OSError as exc:
        raise ProjectError(f"Cannot read {path}: {exc.strerror or exc}") from exc
    title = path.stem.replace("_", " ").strip() or "Imported"
    if suffix == ".txt":
        return [(1, title, text.strip("\n"))] if text.strip() else []
    return parse_markdown(text, title)


def _external_importer():
    try:
        module = importlib.import_module("swiftwriter.export.importers")
    except ImportError:
        return None
    return getattr(module, "import_file", None)


def _as_tuple(item) -> tuple[int, str, str]:
    if isinstance(item, tuple):
        level, title, body = item
    else:  # an object with level / title / body (or markdown)
        level, title = item.level, item.title
        body = getattr(item, "body", None) or getattr(item, "markdown", "") or ""
    return int(level), str(title or "").strip() or "Untitled", str(body)


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

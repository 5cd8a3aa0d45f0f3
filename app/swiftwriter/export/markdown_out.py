"""Manuscript to one Markdown file: headings from the tree, each text's own Markdown untouched.

Title and author go into a YAML front-matter block (read by Pandoc, static-site tools and this
package's importer). A scene opens with a scene break instead of a heading wherever the Word
export sets one (model.opens_with_scene_break: every scene in the book styles, an untitled one
in any), the way writers separate scenes by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path

from swiftwriter.export.files import write_atomically
from swiftwriter.export.mdparse import mark_scene_breaks
from swiftwriter.export.model import (
    Manuscript,
    check_text,
    fallback_title,
    opens_with_scene_break,
)

SCENE_BREAK = "* * *"
_TITLE_SPECIALS = re.compile(r"([\\`*_\[\]#])")
_TAG_LIKE = re.compile(r"<(?=[A-Za-z/!?])")
_BLANK_RUNS = re.compile(r"\n{3,}")


def escape_title(title: str) -> str:
    """A title is plain text: escape what Markdown would read as markup."""
    text = " ".join(title.split())
    text = _TITLE_SPECIALS.sub(r"\\\1", text)
    return _TAG_LIKE.sub("&lt;", text)


def render_markdown(manuscript: Manuscript, style: str = "novel") -> str:
    parts: list[str] = []
    meta = [(k, v) for k, v in (("title", manuscript.title), ("author", manuscript.author)) if v]
    if meta:
        lines = ["---"]
        lines += [f"{k}: {json.dumps(' '.join(v.split()), ensure_ascii=False)}" for k, v in meta]
        lines.append("---")
        parts.append("\n".join(lines))
    counters: dict[str, int] = {}
    text_since_heading = False
    for section in manuscript.sections:
        counters[section.kind] = counters.get(section.kind, 0) + 1
        if opens_with_scene_break(section, style):
            if text_since_heading:
                parts.append(SCENE_BREAK)
        else:
            level = min(max(section.level, 1), 6)
            title = fallback_title(section, counters[section.kind])
            parts.append(f"{'#' * level} {escape_title(title)}")
            text_since_heading = False
        # a writer's lone '#' scene break would be an empty heading in other Markdown tools
        body = mark_scene_breaks(section.body.replace("\r\n", "\n"))
        body = _BLANK_RUNS.sub("\n\n", body).strip("\n")
        if body.strip():
            parts.append(body)
            text_since_heading = True
    return "\n\n".join(parts) + "\n" if parts else ""


def export_markdown(
    manuscript: Manuscript, out: Path | str, strict: bool = False, job=None, style: str = "novel"
) -> int:
    """Write `out` as UTF-8; returns how many control characters were dropped. `job` (an
    ExportJob) may cancel it before the file is replaced."""
    clean, removed = check_text(manuscript, strict=strict)
    text = render_markdown(clean, style)

    def write(tmp: str) -> None:
        Path(tmp).write_text(text, encoding="utf-8", newline="\n")

    write_atomically(out, write, job=job)
    return removed

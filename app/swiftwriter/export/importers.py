"""Import .md, .txt and .docx files as a manuscript: headings become sections, the rest stays
(or becomes) Markdown, so an imported file edits like one written in the app.

`import_file(path)` gives the store what it needs: [(level, title, markdown), ...] with levels
that start at 1 and never skip one, so they always make a valid tree."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

from docx.opc.exceptions import PackageNotFoundError

from swiftwriter.errors import UserError
from swiftwriter.export.docx_in import docx_to_manuscript
from swiftwriter.export.mdparse import MarkdownParser
from swiftwriter.export.model import Manuscript, Section

SUFFIXES = (".md", ".markdown", ".txt", ".docx")

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_NOT_SETEXT_TEXT = re.compile(r"^\s*([-+*>]|\d+[.)])(\s|$)|^ {4}|^\t")


def import_file(path: Path | str) -> list[tuple[int, str, str]]:
    """Sections of a .md, .txt or .docx file as (level, title, markdown)."""
    ms = import_manuscript(path)
    return [(s.level, s.title, s.body) for s in ms.sections]


def import_manuscript(path: Path | str) -> Manuscript:
    """The whole file as a manuscript, with the title and author it names, if any."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise UserError(f"No such file: {file}")
    suffix = file.suffix.lower()
    if suffix == ".docx":
        try:
            ms = docx_to_manuscript(file)
        except (zipfile.BadZipFile, PackageNotFoundError, KeyError, ValueError) as exc:
            raise UserError(f"{file} is not a Word (.docx) document: {exc}") from exc
        return _finish(ms, file.stem)
    if suffix in (".md", ".markdown"):
        return _finish(markdown_to_manuscript(read_text(file)), file.stem)
    if suffix == ".txt":
        text = read_text(file).strip("\n")
        return _finish(
            Manuscript(sections=[Section(1, "", text)] if text.strip() else []), file.stem
        )
    raise UserError(f"Cannot import {file.name}: choose a {', '.join(SUFFIXES)} file")


def read_text(file: Path) -> str:
    """UTF-8 (with or without BOM), UTF-16 with a BOM, or else Windows-1252, as saved by
    older Windows editors; line ends become '\\n'."""
    raw = file.read_bytes()
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = raw.decode("utf-16")
    else:
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            try:
                text = raw.decode("cp1252")
            except UnicodeDecodeError as exc:
                raise UserError(f"{file} is neither UTF-8 nor Windows-1252 text") from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _front_matter(lines: list[str]) -> tuple[dict[str, str], list[str]]:
    """title/author from a leading YAML block of `key: value` lines (what export writes)."""
    if not lines or lines[0].strip() != "---":
        return {}, lines
    meta: dict[str, str] = {}
    for end in range(1, min(len(lines), 60)):
        line = lines[end]
        if line.strip() in ("---", "..."):
            return meta, lines[end + 1 :]
        key, sep, value = line.partition(":")
        if not sep or not key.strip().isidentifier():
            return {}, lines
        value = value.strip()
        if value.startswith('"'):
            try:
                value = json.loads(value)
            except ValueError:
                value = value.strip('"')
        elif value.startswith("'") and value.endswith("'") and len(value) > 1:
            value = value[1:-1].replace("''", "'")
        meta[key.strip().lower()] = str(value)
    return {}, lines


def markdown_to_manuscript(text: str) -> Manuscript:
    """Split Markdown at its ATX ('# Title') and setext ('Title' over '===') headings."""
    meta, lines = _front_matter(text.replace("\r\n", "\n").split("\n"))
    parser = MarkdownParser()
    sections: list[tuple[int, str, list[str]]] = [(0, "", [])]  # level 0: text before a heading
    fence = None
    for line in lines:
        body = sections[-1][2]
        m = _FENCE.match(line)
        if m:
            mark = m.group(1)[0]
            fence = mark if fence is None else (None if mark == fence else fence)
            body.append(line)
            continue
        if fence is not None:
            body.append(line)
            continue
        atx = _ATX.match(line)
        if atx and not (len(atx.group(1)) == 1 and not (atx.group(2) or "").strip()):
            title = parser.plain(atx.group(2) or "")
            sections.append((len(atx.group(1)), title, []))
            continue
        setext = _SETEXT.match(line)
        if (
            setext
            and body
            and body[-1].strip()
            and not _NOT_SETEXT_TEXT.match(body[-1])
            and (len(body) < 2 or not body[-2].strip())
        ):
            title = parser.plain(body.pop())
            sections.append((1 if setext.group(1)[0] == "=" else 2, title, []))
            continue
        body.append(line)
    top = min((level for level, _, _ in sections[1:]), default=1)
    out = []
    for level, title, body in sections:
        text_body = "\n".join(body).strip("\n")
        if level == 0 and not text_body.strip():
            continue
        # Text before the first heading stands beside the top headings, not above them.
        out.append(Section(level=level or top, title=title, body=text_body))
    return Manuscript(title=meta.get("title", ""), author=meta.get("author", ""), sections=out)


def normalize_levels(sections: list[Section]) -> list[Section]:
    """Shift levels so the shallowest is 1 and clamp jumps (# then ###) to one step deeper."""
    if not sections:
        return []
    base = min(s.level for s in sections)
    out = []
    previous = 0
    for s in sections:
        level = min(s.level - base + 1, previous + 1)
        out.append(Section(level=level, title=s.title, body=s.body, kind=s.kind, id=s.id))
        previous = level
    return out


def _finish(ms: Manuscript, stem: str) -> Manuscript:
    """Untitled leading text takes the file's name; an empty file still gives one section."""
    sections = [
        s if s.title.strip() or s is not ms.sections[0] else Section(s.level, stem, s.body)
        for s in ms.sections
    ] or [Section(1, stem, "")]
    return Manuscript(title=ms.title, author=ms.author, sections=normalize_levels(sections))

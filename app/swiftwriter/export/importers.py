"""Import .md, .txt and .docx files as a manuscript: headings become sections, the rest stays
(or becomes) Markdown, so an imported file edits like one written in the app.

`import_file(path)` gives the store what it needs: [(level, title, markdown), ...] with levels
that start at 1 and never skip one, so they always make a valid tree."""

from __future__ import annotations

import codecs
import contextlib
import json
import re
import zipfile
from pathlib import Path

from docx.opc.exceptions import PackageNotFoundError
from lxml import etree

from swiftwriter.errors import UserError
from swiftwriter.export.docx_in import docx_to_manuscript
from swiftwriter.export.docx_package import check_docx_package
from swiftwriter.export.mdparse import MarkdownParser, render_tokens
from swiftwriter.export.model import Manuscript, Section

SUFFIXES = (".md", ".markdown", ".txt", ".docx")
# C0 and C1 controls and DEL (terminal escapes among them): a manuscript never means them, and
# printed raw they would drive the writer's terminal. Bodies keep tabs and line breaks.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SURROGATES = re.compile("[\ud800-\udfff]")  # a file name's bytes that are not UTF-8
_C1 = re.compile("[\x80-\x9f]")
MAX_TEXT_BYTES = 64 << 20  # a text file this large is not a manuscript (about 10 million words)


def import_file(path: Path | str, encoding: str | None = None) -> list[tuple[int, str, str]]:
    """Sections of a .md, .txt or .docx file as (level, title, markdown)."""
    ms = import_manuscript(path, encoding)
    return [(s.level, s.title, s.body) for s in ms.sections]


def import_manuscript(path: Path | str, encoding: str | None = None) -> Manuscript:
    """The whole file as a manuscript, with the title and author it names, if any. Text files
    are read as `encoding` when given, else as UTF-8 (or UTF-8/16 with a byte-order mark)."""
    file = Path(path).expanduser()
    try:
        found = file.is_file()
    except OSError as exc:  # a name longer than the file system allows, a loop of links
        raise UserError(f"Cannot read {file.name}: {exc.strerror or exc}") from None
    if not found:
        raise UserError(f"No such file: {file}")
    suffix = file.suffix.lower()
    if suffix == ".docx":
        check_docx_package(file)
        try:
            ms = docx_to_manuscript(file)
        except (zipfile.BadZipFile, PackageNotFoundError, KeyError, ValueError) as exc:
            raise UserError(f"{file.name} is not a Word (.docx) document: {exc}") from exc
        except etree.LxmlError as exc:
            raise UserError(f"{file.name} is a damaged Word document ({exc})") from exc
        return _finish(ms, file.stem)
    if suffix in (".md", ".markdown"):
        return _finish(markdown_to_manuscript(read_text(file, encoding)), file.stem)
    if suffix == ".txt":
        text = read_text(file, encoding).strip("\n")
        return _finish(
            Manuscript(sections=[Section(1, "", text)] if text.strip() else []), file.stem
        )
    raise UserError(f"Cannot import {file.name}: choose a {', '.join(SUFFIXES)} file")


def read_text(file: Path, encoding: str | None = None) -> str:
    """The file as text, line ends as '\\n'. Without `encoding`: UTF-8 (a byte-order mark
    allowed), or UTF-16 with its byte-order mark; anything else is refused with the offset of
    the first byte that is not UTF-8, rather than guessed (a wrong guess turns every accented
    letter of the book into two wrong ones). Binary files are refused."""
    size = file.stat().st_size
    if size > MAX_TEXT_BYTES:
        raise UserError(f"{file.name} is too large to import ({size >> 20} MB; at most 64 MB)")
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise UserError(f"Cannot read {file.name}: {exc.strerror or exc}") from None
    if encoding:
        try:
            text = raw.decode(encoding)
            if codecs.lookup(encoding).name == "iso8859-1" and _C1.search(text):
                # a Windows file labelled Latin-1, read as browsers read it: its quotes and
                # dashes would be C1 controls, which the import drops (unless a byte that
                # Windows-1252 leaves unused says it is Latin-1 after all)
                with contextlib.suppress(UnicodeDecodeError):
                    text = raw.decode("cp1252")
        except LookupError:
            raise UserError(f"Unknown encoding '{encoding}'") from None
        except UnicodeDecodeError as exc:
            raise UserError(
                f"{file.name} is not {encoding} text: byte {exc.start} cannot be read in it"
            ) from None
    elif raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = raw.decode("utf-16")
        except UnicodeDecodeError:
            raise UserError(f"{file.name} is damaged UTF-16 text") from None
    elif b"\x00" in raw:
        raise UserError(
            f"{file.name} is not a text file (it holds zero bytes: a binary file, or UTF-16 "
            "without a byte-order mark; save it as UTF-8)"
        )
    else:
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise UserError(
                f"{file.name} is not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset "
                f"{exc.start} is not valid UTF-8. Save it as UTF-8, or name its encoding "
                "(for example --encoding cp1252 for older Windows files)"
            ) from None
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
    """Split Markdown at its top-level headings, ATX ('# Title') and setext ('Title' over
    '==='), as the app's one Markdown parser finds them (so a '#' inside a fence, a quote or a
    list item is no heading); bodies keep their Markdown line for line. A lone '#' is a scene
    break, not an empty heading."""
    meta, lines = _front_matter(text.replace("\r\n", "\n").split("\n"))
    parser = MarkdownParser()
    headings = []  # (first line, line after, level, title)
    tokens = render_tokens("\n".join(lines))
    for token, inline in zip(tokens, tokens[1:], strict=False):
        if token.type == "heading_open" and token.level == 0 and token.map:
            title = _title(parser, inline.content)
            if not title and token.markup == "#":
                continue  # a lone '#': the writer's scene break
            headings.append((token.map[0], token.map[1], int(token.tag[1]), title))
    sections: list[tuple[int, str, list[str]]] = [(0, "", [])]  # level 0: text before a heading
    at = 0
    for first, after, level, title in headings:
        sections[-1][2].extend(lines[at:first])
        sections.append((level, title, []))
        at = after
    sections[-1][2].extend(lines[at:])
    top = min((level for level, _, _ in sections[1:]), default=1)
    out = []
    for level, title, body in sections:
        text_body = "\n".join(body).strip("\n")
        if level == 0 and not text_body.strip():
            continue
        # Text before the first heading stands beside the top headings, not above them.
        out.append(Section(level=level or top, title=title, body=text_body))
    return Manuscript(title=meta.get("title", ""), author=meta.get("author", ""), sections=out)


MAX_MARKED_TITLE = 1000  # a longer heading keeps its text as written: no title is this long,
# and markdown-it takes seconds on a long run of brackets


def _title(parser: MarkdownParser, text: str) -> str:
    """A heading's visible text: its inline markup removed, its blanks collapsed."""
    if len(text) > MAX_MARKED_TITLE:
        return " ".join(text.split())
    return parser.plain(text) if text.strip() else ""


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


def clean_text(text: str) -> str:
    """Text without control characters (tabs and line breaks kept), bytes that were not UTF-8
    as U+FFFD."""
    return _SURROGATES.sub("\ufffd", _CONTROLS.sub("", text))


def clean_title(text: str) -> str:
    """One line of visible text: tabs and line breaks as spaces, other controls dropped."""
    return clean_text(text.replace("\t", " ").replace("\n", " ")).strip()


def _finish(ms: Manuscript, stem: str) -> Manuscript:
    """Untitled leading text takes the file's name; an empty file still gives one section.
    Titles and bodies lose their control characters here, whatever the file's format."""
    stem = clean_title(stem)
    sections = [
        Section(s.level, clean_title(s.title) or (stem if i == 0 else ""), clean_text(s.body))
        for i, s in enumerate(ms.sections)
    ] or [Section(1, stem, "")]
    return Manuscript(
        title=clean_title(ms.title),
        author=clean_title(ms.author),
        sections=normalize_levels(sections),
    )

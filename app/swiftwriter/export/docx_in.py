"""DOCX to a manuscript: heading paragraphs start sections, the other paragraphs become
Markdown with their emphasis, strong text, inline code, links, lists, quotes and scene breaks.

Reads what this package writes and what Word or LibreOffice write: headings are found by the
built-in 'heading N' styles or an outline level; lists by their numbering definitions."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import docx
from docx.oxml.ns import qn
from docx.text.hyperlink import Hyperlink
from docx.text.paragraph import Paragraph
from docx.text.run import Run

from swiftwriter.export import ooxml
from swiftwriter.export.model import Manuscript, Section

MONO_FONTS = {
    "courier new",
    "courier",
    "consolas",
    "menlo",
    "monaco",
    "dejavu sans mono",
    "liberation mono",
    "source code pro",
    "lucida console",
}
QUOTE_STYLES = {"quote", "intense quote", "block text"}
CODE_STYLES = {"source code", "macro", "html preformatted", "plain text"}
SKIP_STYLES = {"toc heading", "subtitle"}
# A paragraph holding only a few '*', '#', '~' or bullets, or the asterism, is a scene break.
_SCENE = re.compile(r"(?:[*#~\u2022\u00b7]\s*){1,5}|\u2042")
_ESCAPE = re.compile(r"([\\`*\[\]]|(?<!\w)_|_(?!\w))")
_ENTITY_LIKE = re.compile(r"&(?=#?\w+;)")
_TAG_LIKE = re.compile(r"<(?=[A-Za-z/!?])")
_LINE_START = re.compile(r"^([#>]|[-+](?=\s))")
_NUMBER_START = re.compile(r"^(\d+)\.(?=\s)")
_WRAPPERS = ["", "*", "**", "***"]  # by italic + 2 * bold


@dataclass
class _Piece:
    text: str
    bold: bool
    italic: bool
    code: bool
    href: str | None


def docx_to_manuscript(path: Path) -> Manuscript:
    document = docx.Document(str(path))
    reader = _Reader(document)
    for p in document.element.body.iter(qn("w:p")):
        reader.paragraph(Paragraph(p, document._body))
    props = document.core_properties
    return Manuscript(
        title=props.title or reader.title,
        author=props.author or "",
        sections=reader.sections(),
    )


class _Reader:
    def __init__(self, document) -> None:
        self.numbering = _numbering_formats(document)
        self.title = ""
        self.parts: list[tuple[int, str, list[str]]] = [(0, "", [])]
        self.kind = ""  # the kind of the last body block, to join lists, quotes and code
        self.counters: dict[str, dict[int, int]] = {}
        self.list_num = ""  # numbering id of the current top-level list

    def sections(self) -> list[Section]:
        top = min((level for level, _, _ in self.parts[1:]), default=1)
        out = []
        for level, title, blocks in self.parts:
            body = "".join(blocks).strip("\n")
            if level == 0 and not body.strip():
                continue
            out.append(Section(level=level or top, title=title, body=body))
        return out

    def _emit(self, kind: str, text: str, same_list: bool = False) -> None:
        blocks = self.parts[-1][2]
        if blocks:
            joined = kind == self.kind and (kind == "code" or same_list)
            blocks.append("\n" if joined else ("\n>\n" if kind == self.kind == "quote" else "\n\n"))
        blocks.append(text)
        self.kind = kind

    def paragraph(self, p) -> None:
        style = _style_name(p)
        if style == "title":
            self.title = self.title or p.text.strip()
            return
        if style in SKIP_STYLES or style.startswith("toc ") or "TOC" in ooxml.field_instructions(p):
            return
        level = _heading_level(p, style)
        if level:
            self.parts.append((level, " ".join(p.text.split()), []))
            self.kind = "heading"
            return
        if style in CODE_STYLES:
            text = p.text
            if self.kind == "code":
                self.parts[-1][2][-1] = self.parts[-1][2][-1][: -len("\n```")]
                self._emit("code", text + "\n```")
            else:
                self._emit("code", f"```\n{text}\n```")
            return
        pieces = list(_pieces(p))
        plain = "".join(x.text for x in pieces).strip()
        if not plain:
            return
        if _SCENE.fullmatch(plain):
            self._emit("rule", "* * *")
            return
        text = _to_markdown(pieces)
        num = self._list_marker(p)
        if num is not None:
            marker, ilvl, num_id = num
            # Items of one list stay together; a new top-level list needs a blank line.
            same_list = ilvl > 0 or num_id == self.list_num
            if ilvl == 0:
                self.list_num = num_id
            self._emit("item", "    " * ilvl + marker + " " + text, same_list)
        elif style in QUOTE_STYLES:
            self._emit("quote", "> " + text.replace("\n", "\n> "))
        else:
            self._emit("para", _NUMBER_START.sub(r"\1\\.", _LINE_START.sub(r"\\\1", text)))

    def _list_marker(self, p) -> tuple[str, int, str] | None:
        num_pr = _num_pr(p)
        if num_pr is None:
            return None
        num_id, ilvl = num_pr
        fmt, start = self.numbering.get((num_id, ilvl), ("bullet", 1))
        if num_id == "0":
            return None
        if fmt == "bullet":
            return "-", ilvl, num_id
        levels = self.counters.setdefault(num_id, {})
        for deeper in [k for k in levels if k > ilvl]:
            del levels[deeper]
        levels[ilvl] = levels.get(ilvl, start - 1) + 1
        return f"{levels[ilvl]}.", ilvl, num_id


def _style_name(p) -> str:
    try:
        return (p.style.name or "").lower() if p.style is not None else ""
    except (KeyError, ValueError):
        return ""


def _heading_level(p, style: str) -> int:
    m = re.fullmatch(r"heading (\d)", style)
    if m:
        return int(m.group(1))
    ppr = p._p.pPr
    candidates = [ppr] if ppr is not None else []
    s = p.style
    while s is not None:  # the paragraph's own outline level, then its style chain's
        candidates.append(s.element.pPr)
        s = s.base_style
    for el in candidates:
        if el is None:
            continue
        lvl = el.find(qn("w:outlineLvl"))
        if lvl is not None:
            value = int(lvl.get(qn("w:val")))
            return value + 1 if value < 9 else 0
    return 0


def _num_pr(p) -> tuple[str, int] | None:
    for el in (p._p.pPr, p.style.element.pPr if p.style is not None else None):
        if el is None or el.numPr is None:
            continue
        num_id = el.numPr.numId
        ilvl = el.numPr.ilvl
        if num_id is not None:
            return str(num_id.val), int(ilvl.val) if ilvl is not None else 0
    return None


def _numbering_formats(document) -> dict[tuple[str, int], tuple[str, int]]:
    """(numId, level) -> (numFmt, start), following each num to its abstractNum."""
    try:
        root = document.part.numbering_part.element
    except (KeyError, NotImplementedError):
        return {}
    abstract: dict[str, dict[int, tuple[str, int]]] = {}
    for a in root.findall(qn("w:abstractNum")):
        levels = {}
        for lvl in a.findall(qn("w:lvl")):
            fmt = lvl.find(qn("w:numFmt"))
            start = lvl.find(qn("w:start"))
            levels[int(lvl.get(qn("w:ilvl")))] = (
                fmt.get(qn("w:val")) if fmt is not None else "decimal",
                int(start.get(qn("w:val"))) if start is not None else 1,
            )
        abstract[a.get(qn("w:abstractNumId"))] = levels
    out = {}
    for num in root.findall(qn("w:num")):
        num_id = num.get(qn("w:numId"))
        ref = num.find(qn("w:abstractNumId"))
        levels = dict(abstract.get(ref.get(qn("w:val")) if ref is not None else "", {}))
        for override in num.findall(qn("w:lvlOverride")):
            start = override.find(qn("w:startOverride"))
            ilvl = int(override.get(qn("w:ilvl")))
            if start is not None and ilvl in levels:
                levels[ilvl] = (levels[ilvl][0], int(start.get(qn("w:val"))))
        for ilvl, value in levels.items():
            out[(num_id, ilvl)] = value
    return out


_CONTAINERS = {qn(t) for t in ("w:ins", "w:smartTag", "w:customXml", "w:sdt", "w:sdtContent")}


def _pieces(p):
    """Text pieces of a paragraph with their formatting, including tracked insertions,
    smart tags and content controls (which python-docx's own iterators skip)."""

    def walk(element, href):
        for child in element:
            if child.tag == qn("w:r"):
                run = Run(child, p)
                text = run.text
                if text:
                    yield _Piece(
                        text,
                        _effective(run, "bold"),
                        _effective(run, "italic"),
                        _is_code(run),
                        href,
                    )
            elif child.tag == qn("w:hyperlink"):
                link = Hyperlink(child, p)
                yield from walk(child, link.address or None)
            elif child.tag in _CONTAINERS:
                yield from walk(child, href)

    yield from walk(p._p, None)


def _effective(run, attr: str) -> bool:
    value = getattr(run, attr)
    if value is None and run.style is not None and run.style.type == 2:  # character style
        value = getattr(run.style.font, attr)
    return bool(value)


def _is_code(run) -> bool:
    if run.style is not None and (run.style.name or "").lower() in ("verbatim char", "html code"):
        return True
    return (run.font.name or "").lower() in MONO_FONTS


def _to_markdown(pieces: list[_Piece]) -> str:
    """Merge runs of equal formatting (Word splits them freely), then mark them up."""
    merged: list[_Piece] = []
    for piece in pieces:
        text = piece.text.replace("\t", " ")
        last = merged[-1] if merged else None
        if last and (last.bold, last.italic, last.code, last.href) == (
            piece.bold,
            piece.italic,
            piece.code,
            piece.href,
        ):
            last.text += text
        else:
            merged.append(_Piece(text, piece.bold, piece.italic, piece.code, piece.href))
    out: list[str] = []
    link_text: list[str] = []
    link = None
    for piece in merged:
        if piece.href != link:
            if link:
                out.append(f"[{''.join(link_text)}]({link})")
            link_text = []
            link = piece.href
        (link_text if link else out).append(_inline(piece))
    if link:
        out.append(f"[{''.join(link_text)}]({link})")
    text = "".join(out).strip(" ")
    return re.sub(r" *\n *", "  \n", text)


def _inline(piece: _Piece) -> str:
    text = piece.text
    if piece.code:
        core = text.strip()
        fence = "``" if "`" in core else "`"
        pad = " " if "`" in core else ""
        marked = f"{fence}{pad}{core}{pad}{fence}" if core else ""
    else:
        core = _ESCAPE.sub(r"\\\1", text.strip())
        core = _TAG_LIKE.sub("&lt;", _ENTITY_LIKE.sub("&amp;", core))
        wrap = _WRAPPERS[int(piece.italic) + 2 * int(piece.bold)] if core else ""
        marked = f"{wrap}{core}{wrap}"
    lead = text[: len(text) - len(text.lstrip())]
    trail = text[len(text.rstrip()) :] if text.strip() else ""
    return lead + marked + trail

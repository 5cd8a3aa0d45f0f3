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

from swiftwriter.errors import UserError
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
_ESCAPE = re.compile(r"([\\`*\[\]~]|(?<!\w)_|_(?!\w))")
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
    strike: bool = False


MAX_PARAGRAPHS = 500_000  # ten times the longest novels; a file with more is refused
# Numbers read from the file become indents and counters: list and outline levels are Word's
# 0-8, list starts at most Word's 32767; anything else is read as the nearest sane value.
MAX_LEVEL = 8
MAX_START = 32767


def docx_to_manuscript(path: Path) -> Manuscript:
    document = docx.Document(str(path))
    reader = _Reader(document)
    body = document.element.body
    if sum(1 for _ in body.iter(qn("w:p"))) > MAX_PARAGRAPHS:  # tables' paragraphs included
        raise UserError(
            f"{path.name} has more than {MAX_PARAGRAPHS:,} paragraphs: too many to import"
        )
    for element in body:
        if element.tag == qn("w:tbl"):  # a table becomes a Markdown table
            reader.table(element, document._body)
            continue
        for p in element.iter(qn("w:p")):  # a paragraph, or those inside a content control
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
        self.styles = _Styles(document)
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

    def table(self, tbl, parent) -> None:
        """A pipe table: the first row is the header; a cell's paragraphs join with spaces."""
        rows = []
        for tr in tbl.iterchildren(qn("w:tr")):  # this table's own rows and cells: a table
            cells = []  # nested in a cell gives its text to that cell
            for tc in tr.iterchildren(qn("w:tc")):
                parts = [
                    _to_markdown(list(_pieces(Paragraph(p, parent), self.styles)))
                    for p in tc.iter(qn("w:p"))
                ]
                text = " ".join(x for x in parts if x).replace("  \n", " ")  # one line a row
                cells.append(text.replace("|", "\\|"))
            if cells:
                rows.append(cells)
        if not rows:
            return
        width = max(len(r) for r in rows)
        rows = [r + [""] * (width - len(r)) for r in rows]
        lines = ["| " + " | ".join(r) + " |" for r in rows]
        lines.insert(1, "|" + " --- |" * width)
        self._emit("table", "\n".join(lines))

    def paragraph(self, p) -> None:
        sid = p._p.style or self.styles.default_paragraph
        style = self.styles.name(sid)
        if style == "title":
            self.title = self.title or p.text.strip()
            return
        if style in SKIP_STYLES or style.startswith("toc ") or "TOC" in ooxml.field_instructions(p):
            return
        level = self._heading_level(p, sid, style)
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
        pieces = list(_pieces(p, self.styles))
        plain = "".join(x.text for x in pieces).strip()
        if not plain:
            return
        if _SCENE.fullmatch(plain):
            self._emit("rule", "* * *")
            return
        text = _to_markdown(pieces)
        num = self._list_marker(p, sid)
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

    def _heading_level(self, p, sid: str | None, style: str) -> int:
        m = re.fullmatch(r"heading (\d)", style)
        if m:
            return int(m.group(1))
        ppr = p._p.pPr
        own = ppr.find(qn("w:outlineLvl")) if ppr is not None else None
        value = _outline(own) if own is not None else self.styles.outline(sid)
        return value + 1 if value is not None else 0

    def _list_marker(self, p, sid: str | None) -> tuple[str, int, str] | None:
        num_pr = _num_pr(p._p.pPr) or self.styles.numbering(sid)
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


def _number(value: str | None, default: int | None = None) -> int | None:
    try:
        return int(value) if value is not None and len(value) < 20 else default
    except ValueError:
        return default


def _clamp(value: int, high: int) -> int:
    return min(max(value, 0), high)


def _val(el) -> str | None:
    return el.get(qn("w:val")) if el is not None else None


def _outline(el) -> int | None:
    """An outline level 0-8 (a heading), or None: 9 is body text, the rest is damage."""
    value = _number(_val(el))
    return value if value is not None and 0 <= value <= MAX_LEVEL else None


def _num_pr(ppr) -> tuple[str, int] | None:
    """(numId, list level) of a paragraph's or style's numbering, the level clamped to 0-8."""
    num_pr = ppr.find(qn("w:numPr")) if ppr is not None else None
    num_id = _number(_val(num_pr.find(qn("w:numId")))) if num_pr is not None else None
    if num_id is None:
        return None
    ilvl = _number(_val(num_pr.find(qn("w:ilvl"))), 0)
    return str(num_id), _clamp(ilvl, MAX_LEVEL)


def _on(rpr, tag: str) -> bool | None:
    """A toggle property (w:b, w:i) of an rPr: True, False, or None when not set."""
    el = rpr.find(qn(tag)) if rpr is not None else None
    if el is None:
        return None
    return el.get(qn("w:val"), "true").lower() not in ("0", "false", "off")


class _Styles:
    """Everything the reader needs from styles.xml, read once: python-docx resolves a style by
    scanning every style on each access, which made a long document take a minute."""

    def __init__(self, document) -> None:
        self.info: dict[str, dict] = {}
        self.default_paragraph: str | None = None
        for el in document.styles.element.findall(qn("w:style")):
            sid = el.get(qn("w:styleId"))
            name = el.find(qn("w:name"))
            based = el.find(qn("w:basedOn"))
            ppr = el.find(qn("w:pPr"))
            rpr = el.find(qn("w:rPr"))
            outline = ppr.find(qn("w:outlineLvl")) if ppr is not None else None
            fonts = rpr.find(qn("w:rFonts")) if rpr is not None else None
            self.info[sid] = {
                "name": (name.get(qn("w:val")) if name is not None else sid or "").lower(),
                "type": el.get(qn("w:type")),
                "based_on": based.get(qn("w:val")) if based is not None else None,
                "outline": _outline(outline) if outline is not None else None,
                "num": _num_pr(ppr),
                "bold": _on(rpr, "w:b"),
                "italic": _on(rpr, "w:i"),
                "mono": fonts is not None
                and (fonts.get(qn("w:ascii")) or "").lower() in MONO_FONTS,
            }
            if el.get(qn("w:type")) == "paragraph" and el.get(qn("w:default")) in ("1", "true"):
                self.default_paragraph = sid

    def _chain(self, sid: str | None):
        seen = 0
        while sid in self.info and seen < 20:  # basedOn loops exist in damaged files
            yield self.info[sid]
            sid = self.info[sid]["based_on"]
            seen += 1

    def _first(self, sid: str | None, key: str):
        return next((i[key] for i in self._chain(sid) if i[key] is not None), None)

    def name(self, sid: str | None) -> str:
        return self.info[sid]["name"] if sid in self.info else ""

    def outline(self, sid: str | None) -> int | None:
        return self._first(sid, "outline")

    def numbering(self, sid: str | None) -> tuple[str, int] | None:
        return self._first(sid, "num")

    def run_format(self, sid: str | None) -> tuple[bool, bool, bool]:
        """bold, italic, monospaced as a character style gives them."""
        if sid not in self.info or self.info[sid]["type"] != "character":
            return False, False, False
        name = self.info[sid]["name"]
        mono = name in ("verbatim char", "html code") or bool(self._first(sid, "mono"))
        return bool(self._first(sid, "bold")), bool(self._first(sid, "italic")), mono


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
            ilvl = _number(lvl.get(qn("w:ilvl")))
            if ilvl is None or not 0 <= ilvl <= MAX_LEVEL:
                continue  # no paragraph can be on this level (theirs are clamped to 0-8)
            fmt = lvl.find(qn("w:numFmt"))
            start = _number(_val(lvl.find(qn("w:start"))), 1)
            levels[ilvl] = (_val(fmt) or "decimal", _clamp(start, MAX_START))
        abstract[a.get(qn("w:abstractNumId"))] = levels
    out = {}
    for num in root.findall(qn("w:num")):
        num_id = num.get(qn("w:numId"))
        ref = num.find(qn("w:abstractNumId"))
        levels = dict(abstract.get(ref.get(qn("w:val")) if ref is not None else "", {}))
        for override in num.findall(qn("w:lvlOverride")):
            start = _number(_val(override.find(qn("w:startOverride"))))
            ilvl = _number(override.get(qn("w:ilvl")))
            if start is not None and ilvl in levels:
                levels[ilvl] = (levels[ilvl][0], _clamp(start, MAX_START))
        for ilvl, value in levels.items():
            out[(num_id, ilvl)] = value
    return out


_CONTAINERS = {qn(t) for t in ("w:ins", "w:smartTag", "w:customXml", "w:sdt", "w:sdtContent")}


def _pieces(p, styles: _Styles):
    """Text pieces of a paragraph with their formatting, including tracked insertions,
    smart tags and content controls (which python-docx's own iterators skip)."""

    def walk(element, href):
        for child in element:
            if child.tag == qn("w:r"):
                run = Run(child, p)
                text = run.text
                if not text:
                    continue
                bold, italic, mono = styles.run_format(child.style)
                bold = run.bold if run.bold is not None else bold
                italic = run.italic if run.italic is not None else italic
                mono = mono or (run.font.name or "").lower() in MONO_FONTS
                yield _Piece(text, bool(bold), bool(italic), mono, href, bool(run.font.strike))
            elif child.tag == qn("w:hyperlink"):
                link = Hyperlink(child, p)
                yield from walk(child, link.address or None)
            elif child.tag in _CONTAINERS:
                yield from walk(child, href)

    yield from walk(p._p, None)


def _to_markdown(pieces: list[_Piece]) -> str:
    """Merge runs of equal formatting (Word splits them freely), then mark them up."""
    merged: list[_Piece] = []
    for piece in pieces:
        text = piece.text.replace("\t", " ")
        last = merged[-1] if merged else None
        if last and (last.bold, last.italic, last.code, last.href, last.strike) == (
            piece.bold,
            piece.italic,
            piece.code,
            piece.href,
            piece.strike,
        ):
            last.text += text
        else:
            merged.append(
                _Piece(text, piece.bold, piece.italic, piece.code, piece.href, piece.strike)
            )
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
    # A line break becomes Markdown's hard break, the blanks around it dropped; split, not a
    # regex: ' *\n *' rescans a run of blanks from each of its blanks (300,000 took a minute).
    lines = "".join(out).strip(" ").split("\n")
    if len(lines) == 1:
        return lines[0]
    inner = [line.strip(" ") for line in lines[1:-1]]
    return "  \n".join([lines[0].rstrip(" "), *inner, lines[-1].lstrip(" ")])


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
        if piece.strike and core:
            marked = f"~~{marked}~~"
    lead = text[: len(text) - len(text.lstrip())]
    trail = text[len(text.rstrip()) :] if text.strip() else ""
    return lead + marked + trail

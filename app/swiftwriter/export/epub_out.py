"""Manuscript to EPUB 3, with the standard library's zipfile and lxml (no e-book package).

The book: a title page, a copyright page and a dedication before the text and one back-matter
page after it, each chosen per export (model.BookMatter); one XHTML file per chapter (where
model.chapter_starts says a chapter begins: Word starts a new page there); scenes inside it
follow the same scene-break rule as every other format (model.opens_with_scene_break). The
contents are given twice: nav.xhtml for EPUB 3 readers and toc.ncx for older ones. Bodies are
read as Markdown by mdparse, the one dialect of the app; the XHTML is built as a tree, so every
text is escaped by lxml, never by hand.

The package is what EPUBCheck asks for: `mimetype` first and stored, META-INF/container.xml
naming the OPF, which lists every other file in its manifest; links leave the book only to
web and mail addresses (a relative link would point at a file the book does not hold)."""

from __future__ import annotations

import datetime as dt
import locale
import os
import re
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from lxml import etree

from swiftwriter.errors import UserError
from swiftwriter.export.files import write_atomically
from swiftwriter.export.mdparse import Block, MarkdownParser, Span
from swiftwriter.export.model import (
    BookMatter,
    Manuscript,
    chapter_starts,
    check_matter,
    check_text,
    fallback_title,
    opens_with_scene_break,
)
from swiftwriter.export.ooxml import first_strong_direction

MIMETYPE = "application/epub+zip"
FOLDER = "EPUB"  # the publication's files inside the zip
XHTML = "http://www.w3.org/1999/xhtml"
OPS = "http://www.idpf.org/2007/ops"  # epub:type
OPF = "http://www.idpf.org/2007/opf"
DC = "http://purl.org/dc/elements/1.1/"
NCX = "http://www.daisy.org/z3986/2005/ncx/"
CONTAINER = "urn:oasis:names:tc:opendocument:xmlns:container"
XHTML_TYPE = "application/xhtml+xml"
SCENE_BREAK = "* * *"
MANUSCRIPT_SCENE_BREAK = "#"
LINK_SCHEMES = ("http:", "https:", "mailto:")
LANGUAGE_TAG = re.compile(r"[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*")
_EPUB_TYPE = f"{{{OPS}}}type"
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"

STYLESHEET = """\
body { margin: 0 5%; font-family: serif; line-height: 1.4; }
h1, h2 { text-align: center; margin: 2em 0 1em; font-weight: normal; }
h3, h4, h5, h6 { margin: 1.5em 0 0.5em; }
p { margin: 0; text-indent: 0; }
p + p { text-indent: 1.5em; }
body.report p { margin: 0 0 0.6em; }
body.report p + p { text-indent: 0; }
p.scene-break, p.scene-break + p { text-indent: 0; }
p.scene-break { text-align: center; margin: 1em 0; }
blockquote { margin: 1em 2em; }
pre { white-space: pre-wrap; font-family: monospace; font-size: 0.9em; margin: 1em 0; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #888; padding: 0.2em 0.5em; }
section.titlepage { text-align: center; margin-top: 30%; }
section.titlepage h1 { font-size: 2em; }
section.titlepage p.author { font-size: 1.3em; margin-top: 1em; }
section.copyright-page { margin-top: 50%; font-size: 0.9em; }
section.dedication { text-align: center; font-style: italic; margin-top: 30%; }
section.copyright-page p, section.dedication p { text-indent: 0; margin: 0 0 0.5em; }
"""


def default_language(env: dict | None = None) -> str:
    """The language of the locale as a tag ('de-DE' from de_DE.UTF-8), else 'en'."""
    env = os.environ if env is None else env
    names = [env.get(k, "") for k in ("LC_ALL", "LC_MESSAGES", "LANG")]
    names.append((locale.getlocale()[0] or "") if env is os.environ else "")
    for name in names:
        tag = name.split(".")[0].split("@")[0].replace("_", "-")
        if tag not in ("C", "POSIX") and LANGUAGE_TAG.fullmatch(tag):
            return tag
    return "en"


def check_language(tag: str) -> None:
    if not LANGUAGE_TAG.fullmatch(tag):
        raise UserError(f"'{tag}' is not a language tag such as en, en-GB or pt-BR")


def export_epub(
    manuscript: Manuscript,
    out: Path | str,
    style: str = "novel",
    matter: BookMatter | None = None,
    language: str = "",
    strict: bool = False,
    job=None,
) -> int:
    """Write `out`; returns how many control characters were dropped (model.check_text).
    `job` (an ExportJob) may cancel it between sections and before the file is replaced."""
    language = language or default_language()
    check_language(language)
    clean, removed = check_text(manuscript, strict=strict)
    matter, dropped = check_matter(matter or BookMatter(), strict=strict)
    parts = build_epub(clean, style, matter, language, job)
    write_atomically(out, lambda tmp: write_package(tmp, parts), job=job)
    return removed + dropped


def write_package(path: str | Path, parts: dict[str, bytes]) -> None:
    """The zip as EPUB readers expect it: `mimetype` first, stored, with no extra field."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), MIMETYPE, compress_type=zipfile.ZIP_STORED)
        for name, data in parts.items():
            zf.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED)


def build_epub(
    manuscript: Manuscript,
    style: str = "novel",
    matter: BookMatter | None = None,
    language: str = "en",
    job=None,
) -> dict[str, bytes]:
    """Every file of the book but `mimetype`, by its name in the zip, in the zip's order."""
    book = _Book(manuscript, style, matter or BookMatter(), language, job)
    return book.build()


@dataclass
class _Page:
    """One XHTML file of the book: its name, its manifest id, its label in the contents."""

    name: str
    id: str
    label: str
    root: etree._Element
    section: etree._Element


@dataclass
class _Entry:
    """A line of the contents, with the lines below it."""

    level: int
    label: str
    href: str
    children: list[_Entry] = field(default_factory=list)


def _x(tag: str) -> str:
    return f"{{{XHTML}}}{tag}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _Book:
    """The pages of one book as XHTML trees, with the contents that lead to them."""

    def __init__(self, ms: Manuscript, style: str, matter: BookMatter, language: str, job):
        self.ms = ms
        self.style = style
        self.matter = matter
        self.language = language
        self.check = job.check if job is not None else lambda: None
        self.title = _one_line(ms.title) or "Untitled"
        self.author = _one_line(ms.author)
        self.identifier = book_identifier(ms)
        self.pages: list[_Page] = []
        self.contents: list[_Entry] = []
        self.first_chapter: str | None = None
        self.chapter_count = 0
        self.parser = MarkdownParser()
        self.scene_break = MANUSCRIPT_SCENE_BREAK if style == "manuscript" else SCENE_BREAK

    def build(self) -> dict[str, bytes]:
        matter = self.matter
        if matter.title_page:
            self._title_page()
        if matter.copyright.strip():
            self._lines_page("copyright", "Copyright", "copyright-page", matter.copyright)
        if matter.dedication.strip():
            self._lines_page("dedication", "Dedication", "dedication", matter.dedication)
        self._chapters()
        if matter.back_matter.strip():
            self._back_matter()
        if not self.pages:  # a book has at least one page to open at
            self._title_page()
        self.check()
        parts = {"META-INF/container.xml": _container()}
        parts[f"{FOLDER}/content.opf"] = self._package()
        parts[f"{FOLDER}/nav.xhtml"] = self._nav()
        parts[f"{FOLDER}/toc.ncx"] = self._ncx()
        parts[f"{FOLDER}/style.css"] = STYLESHEET.encode()
        for page in self.pages:
            parts[f"{FOLDER}/{page.name}"] = _xhtml_bytes(page.root)
        return parts

    # -- pages ----------------------------------------------------------------------------
    def _page(self, name: str, label: str, kind: str) -> _Page:
        root, body = _xhtml_document(label, self.language, self.style)
        section = etree.SubElement(body, _x("section"))
        section.set(_EPUB_TYPE, kind)
        section.set("class", kind)
        page = _Page(f"{name}.xhtml", name, label, root, section)
        self.pages.append(page)
        return page

    def _title_page(self) -> None:
        page = self._page("title", "Title Page", "titlepage")
        etree.SubElement(page.section, _x("h1")).text = self.title
        if self.author:
            by = etree.SubElement(page.section, _x("p"), {"class": "author"})
            by.text = self.author
        self.contents.append(_Entry(1, page.label, page.name))

    def _lines_page(self, name: str, label: str, kind: str, text: str) -> None:
        """A copyright or dedication page: each line of the text a paragraph of its own."""
        page = self._page(name, label, kind)
        page.section.set("aria-label", label)
        for line in text.splitlines():
            if line.strip():
                etree.SubElement(page.section, _x("p")).text = _one_line(line)
        self.contents.append(_Entry(1, label, page.name))

    def _back_matter(self) -> None:
        title = _one_line(self.matter.back_title)
        page = self._page("back", title or "Back Matter", "backmatter")
        if title:
            etree.SubElement(page.section, _x("h1")).text = title
        else:
            page.section.set("aria-label", page.label)
        _Body(page.section, 1, self.scene_break).add(self.parser.blocks(self.matter.back_matter))
        self.contents.append(_Entry(1, page.label, page.name))

    def _chapters(self) -> None:
        """One file per chapter; a document before the first chapter opens a file of its own."""
        sections = self.ms.sections
        counters: dict[str, int] = {}
        page = body = None
        for index, (section, starts) in enumerate(
            zip(sections, chapter_starts(sections), strict=True), start=1
        ):
            self.check()
            counters[section.kind] = counters.get(section.kind, 0) + 1
            scene_break = opens_with_scene_break(section, self.style)
            title = _one_line(fallback_title(section, counters[section.kind]))
            if page is None or starts:
                self.chapter_count += 1
                kind = "part" if section.kind == "part" else "chapter"
                page = self._page(f"chapter-{self.chapter_count:03d}", title, kind)
                body = _Body(page.section, section.level, self.scene_break)
                self.first_chapter = self.first_chapter or page.name
            if scene_break:
                body.scene_break()
            else:
                anchor = f"s{index}"
                body.heading(title, section.level, anchor)
                self.contents.append(_Entry(section.level, title, f"{page.name}#{anchor}"))
            body.base_level = section.level
            body.add(self.parser.blocks(section.body))

    # -- the package ----------------------------------------------------------------------
    def _package(self) -> bytes:
        root = etree.Element(
            f"{{{OPF}}}package",
            {"version": "3.0", "unique-identifier": "book-id", _XML_LANG: self.language},
            nsmap={None: OPF, "dc": DC},
        )
        metadata = etree.SubElement(root, f"{{{OPF}}}metadata")
        dc = {"identifier": self.identifier, "title": self.title, "language": self.language}
        if self.author:
            dc["creator"] = self.author
        if self.matter.copyright.strip():
            dc["rights"] = _one_line(self.matter.copyright)
        for name, value in dc.items():
            element = etree.SubElement(metadata, f"{{{DC}}}{name}")
            element.text = value
            if name == "identifier":
                element.set("id", "book-id")
        modified = etree.SubElement(metadata, f"{{{OPF}}}meta", {"property": "dcterms:modified"})
        modified.text = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        manifest = etree.SubElement(root, f"{{{OPF}}}manifest")
        items = [
            ("nav", "nav.xhtml", XHTML_TYPE, "nav"),
            ("ncx", "toc.ncx", "application/x-dtbncx+xml", None),
            ("css", "style.css", "text/css", None),
            *((p.id, p.name, XHTML_TYPE, None) for p in self.pages),
        ]
        for item_id, href, media_type, properties in items:
            item = etree.SubElement(manifest, f"{{{OPF}}}item")
            item.attrib.update({"id": item_id, "href": href, "media-type": media_type})
            if properties:
                item.set("properties", properties)
        spine = etree.SubElement(root, f"{{{OPF}}}spine", {"toc": "ncx"})
        for page in self.pages:
            etree.SubElement(spine, f"{{{OPF}}}itemref", {"idref": page.id})
        return _xml_bytes(root)

    def _nav(self) -> bytes:
        root, body = _xhtml_document("Contents", self.language, self.style)
        toc = etree.SubElement(body, _x("nav"), {"id": "toc", "role": "doc-toc"})
        toc.set(_EPUB_TYPE, "toc")
        etree.SubElement(toc, _x("h1")).text = "Contents"
        _nav_list(toc, _nest(self.contents))
        if self.first_chapter:  # where a reader opens the book, past the front matter
            landmarks = etree.SubElement(body, _x("nav"), {"id": "landmarks", "hidden": "hidden"})
            landmarks.set(_EPUB_TYPE, "landmarks")
            etree.SubElement(landmarks, _x("h2")).text = "Landmarks"
            item = etree.SubElement(etree.SubElement(landmarks, _x("ol")), _x("li"))
            link = etree.SubElement(item, _x("a"), {"href": self.first_chapter})
            link.set(_EPUB_TYPE, "bodymatter")
            link.text = "Start of the text"
        return _xhtml_bytes(root)

    def _ncx(self) -> bytes:
        """The contents for EPUB 2 readers, which know no nav.xhtml."""
        root = etree.Element(f"{{{NCX}}}ncx", {"version": "2005-1"}, nsmap={None: NCX})
        head = etree.SubElement(root, f"{{{NCX}}}head")
        entries = _nest(self.contents)
        meta = {"dtb:uid": self.identifier, "dtb:depth": str(_depth(entries))}
        meta |= {"dtb:totalPageCount": "0", "dtb:maxPageNumber": "0"}
        for name, content in meta.items():
            etree.SubElement(head, f"{{{NCX}}}meta", {"name": name, "content": content})
        title = etree.SubElement(root, f"{{{NCX}}}docTitle")
        etree.SubElement(title, f"{{{NCX}}}text").text = self.title
        nav_map = etree.SubElement(root, f"{{{NCX}}}navMap")
        order = iter(range(1, len(self.contents) + 1))

        def add(parent: etree._Element, entries: list[_Entry]) -> None:
            for entry in entries:
                number = str(next(order))
                point = etree.SubElement(parent, f"{{{NCX}}}navPoint")
                point.attrib.update({"id": f"nav-{number}", "playOrder": number})
                label = etree.SubElement(point, f"{{{NCX}}}navLabel")
                etree.SubElement(label, f"{{{NCX}}}text").text = entry.label
                etree.SubElement(point, f"{{{NCX}}}content", {"src": entry.href})
                add(point, entry.children)

        add(nav_map, entries)
        return _xml_bytes(root)


def book_identifier(ms: Manuscript) -> str:
    """A UUID that stays the same for every export of a project (from its creation time, or
    its title and author where it has none), so a reader replaces the old copy."""
    key = ms.identity or f"{_one_line(ms.title)}\n{_one_line(ms.author)}"
    return f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, 'swiftwriter:book:' + key)}"


def _nest(entries: list[_Entry]) -> list[_Entry]:
    """The flat contents as a tree: each line goes below the last one of a lower level."""
    top: list[_Entry] = []
    for entry in entries:
        siblings = top
        while siblings and siblings[-1].level < entry.level:
            siblings = siblings[-1].children
        siblings.append(_Entry(entry.level, entry.label, entry.href))
    return top


def _depth(entries: list[_Entry]) -> int:
    return max((1 + _depth(e.children) for e in entries), default=1)


def _nav_list(parent: etree._Element, entries: list[_Entry]) -> None:
    ol = etree.SubElement(parent, _x("ol"))
    for entry in entries:
        li = etree.SubElement(ol, _x("li"))
        etree.SubElement(li, _x("a"), {"href": entry.href}).text = entry.label
        if entry.children:
            _nav_list(li, entry.children)


def _container() -> bytes:
    root = etree.Element(f"{{{CONTAINER}}}container", {"version": "1.0"}, nsmap={None: CONTAINER})
    files = etree.SubElement(root, f"{{{CONTAINER}}}rootfiles")
    etree.SubElement(
        files,
        f"{{{CONTAINER}}}rootfile",
        {"full-path": f"{FOLDER}/content.opf", "media-type": "application/oebps-package+xml"},
    )
    return _xml_bytes(root)


def _xhtml_document(title: str, language: str, style: str):
    """An empty XHTML page with its title and the style sheet: (root, body)."""
    root = etree.Element(_x("html"), nsmap={None: XHTML, "epub": OPS})
    root.attrib.update({"lang": language, _XML_LANG: language})
    head = etree.SubElement(root, _x("head"))
    etree.SubElement(head, _x("meta"), {"charset": "utf-8"})
    etree.SubElement(head, _x("title")).text = title
    etree.SubElement(head, _x("link"), {"rel": "stylesheet", "href": "style.css"})
    body = etree.SubElement(root, _x("body"), {"class": style})
    return root, body


def _xml_bytes(root: etree._Element) -> bytes:
    return etree.tostring(root, xml_declaration=True, encoding="utf-8")


def _xhtml_bytes(root: etree._Element) -> bytes:
    return etree.tostring(root, xml_declaration=True, encoding="utf-8", doctype="<!DOCTYPE html>")


@dataclass
class _List:
    level: int
    list_id: int
    element: etree._Element
    item: etree._Element | None = None


class _Body:
    """Markdown blocks into a page: lists and block quotes nested again from mdparse's flat
    blocks, headings inside a text below its document's own level."""

    def __init__(self, parent: etree._Element, base_level: int, scene_break: str):
        self.quotes = [parent]  # the block quote open at each depth; 0 is the page
        self.lists: list[_List] = []
        self.base_level = base_level
        self.scene_break_text = scene_break
        self.text_since_heading = False  # a scene after text is set apart by a scene break

    def heading(self, title: str, level: int, anchor: str) -> None:
        self._quote(0)
        h = etree.SubElement(self.quotes[0], _x(f"h{min(max(level, 1), 6)}"), {"id": anchor})
        h.text = title
        _set_direction(h, title)
        self.text_since_heading = False

    def scene_break(self) -> None:
        if self.text_since_heading:
            self._quote(0)
            self._scene_break(self.quotes[0])

    def _scene_break(self, parent: etree._Element) -> None:
        p = etree.SubElement(parent, _x("p"), {"class": "scene-break"})
        p.text = self.scene_break_text
        self.text_since_heading = False

    def add(self, blocks: list[Block]) -> None:
        for block in blocks:
            self._quote(block.quote)
            if block.kind == "item":
                self._item(block)
                self.text_since_heading = True
                continue
            if block.kind == "para" and block.in_item and self._continue_item(block):
                continue
            self.lists.clear()
            parent = self.quotes[-1]
            if block.kind == "rule":
                self._scene_break(parent)
                continue
            if block.kind == "heading":
                _paragraph(parent, block.spans, f"h{min(self.base_level + block.level, 6)}")
                self.text_since_heading = False
                continue
            if block.kind == "code":
                pre = etree.SubElement(parent, _x("pre"))
                etree.SubElement(pre, _x("code")).text = block.text
            elif block.kind == "table":
                _table(parent, block)
            else:
                _paragraph(parent, block.spans)
            self.text_since_heading = True

    def _quote(self, depth: int) -> None:
        if depth == len(self.quotes) - 1:
            return
        self.lists.clear()
        del self.quotes[depth + 1 :]
        while len(self.quotes) - 1 < depth:
            self.quotes.append(etree.SubElement(self.quotes[-1], _x("blockquote")))

    def _item(self, block: Block) -> None:
        lists = self.lists
        while lists and lists[-1].level > block.level:
            lists.pop()
        if lists and lists[-1].level == block.level and lists[-1].list_id != block.list_id:
            lists.pop()
        if not lists or lists[-1].level < block.level:
            host = lists[-1].item if lists and lists[-1].item is not None else self.quotes[-1]
            element = etree.SubElement(host, _x("ol" if block.ordered else "ul"))
            if block.ordered and block.start != 1:
                element.set("start", str(block.start))
            lists.append(_List(block.level, block.list_id, element))
        top = lists[-1]
        top.item = etree.SubElement(top.element, _x("li"))
        _inline(top.item, block.spans)

    def _continue_item(self, block: Block) -> bool:
        """A further paragraph of an open list item; False when no item is open there."""
        while self.lists and self.lists[-1].level > block.level:
            self.lists.pop()
        top = self.lists[-1] if self.lists else None
        if top is None or top.level != block.level or top.item is None:
            return False
        _paragraph(top.item, block.spans)
        return True


def _paragraph(parent: etree._Element, spans: list[Span], tag: str = "p") -> None:
    element = etree.SubElement(parent, _x(tag))
    _inline(element, spans)
    _set_direction(element, "".join(s.text for s in spans))


def _set_direction(element: etree._Element, text: str) -> None:
    """A paragraph that reads right to left says so, as a Word export does: a reader would
    otherwise set a Hebrew or Arabic paragraph flush left, its punctuation at the wrong end."""
    if first_strong_direction(text) == "rtl":
        element.set("dir", "rtl")


def _table(parent: etree._Element, block: Block) -> None:
    """A Markdown table: its first row the header."""
    table = etree.SubElement(parent, _x("table"))
    head, *rows = block.rows
    tr = etree.SubElement(etree.SubElement(table, _x("thead")), _x("tr"))
    for cell in head:
        _inline(etree.SubElement(tr, _x("th")), cell.spans)
    body = etree.SubElement(table, _x("tbody")) if rows else None
    for row in rows:
        tr = etree.SubElement(body, _x("tr"))
        for cell in row:
            _inline(etree.SubElement(tr, _x("td")), cell.spans)


def _inline(parent: etree._Element, spans: list[Span]) -> None:
    """Spans as text with strong / em / s / code and links; a line break as <br/>."""
    for span in spans:
        if span.is_break:
            etree.SubElement(parent, _x("br"))
            continue
        host = parent
        href = span.href if span.href and span.href.lower().startswith(LINK_SCHEMES) else None
        wrappers = (("a", href), ("strong", span.bold), ("em", span.italic))
        for tag, wanted in (*wrappers, ("s", span.strike), ("code", span.code)):
            if wanted:
                host = etree.SubElement(host, _x(tag))
                if tag == "a":
                    host.set("href", href)
        if host is not parent:
            host.text = span.text
        elif len(parent):
            parent[-1].tail = (parent[-1].tail or "") + span.text
        else:
            parent.text = (parent.text or "") + span.text

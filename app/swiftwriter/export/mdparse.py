"""Markdown to a flat list of blocks with formatted spans: the one Markdown dialect of the app
(the DOCX export, the importers and the editor's highlighter all read Markdown here).

markdown-it-py parses CommonMark with tables, strikethrough and footnotes (chosen over
Python-Markdown by measurement on a corpus of tricky inputs, resources/dev/markdown_dialects.py:
a list right after a paragraph line, lists nested by two or three spaces, ~~strike~~ and tables
are what writers type); its HTML is walked with the standard library's HTMLParser, which also
decodes entities. Scene-break lines ('***', '* * *', '---', and a lone '#') become `rule`
blocks; footnotes become a numbered list at the end."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from markdown_it import MarkdownIt
from mdit_py_plugins.footnote import footnote_plugin


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).use(footnote_plugin)


_MD = _parser()


def render_html(text: str) -> str:
    return _MD.render(text)


_BLOCKS = _parser().disable("inline")


def render_tokens(text: str) -> list:
    """markdown-it's block tokens (with their source lines in `map`), for the importer; the
    text inside each block stays unparsed in `content`: the importer keeps bodies as written,
    and parsing their inline markup took seconds on long runs of brackets or emphasis marks."""
    return _BLOCKS.parse(text)


@dataclass
class Span:
    text: str
    bold: bool = False
    italic: bool = False
    code: bool = False
    strike: bool = False
    href: str | None = None

    @property
    def is_break(self) -> bool:
        return self.text == "\n"


@dataclass
class Block:
    """kind: 'para', 'heading', 'item' (a list item's first paragraph), 'rule', 'code'.

    `level` is the heading level or the list depth (1 = outermost); `quote` the block-quote depth;
    `list_id` tells list instances apart (numbering restarts per list), `start` its first number;
    `in_item` marks a paragraph that continues a list item at depth `level`."""

    kind: str
    spans: list[Span] = field(default_factory=list)
    level: int = 0
    quote: int = 0
    ordered: bool = False
    list_id: int = 0
    start: int = 1
    in_item: bool = False
    text: str = ""  # for 'code'
    rows: list[list[Block]] = field(default_factory=list)  # for 'table': cells, header first

    def plain(self) -> str:
        return "".join(s.text for s in self.spans)


_SPACES = re.compile(r"[ \t\r\n]+")
_LONE_HASH = re.compile(r"^ {0,3}#\s*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def mark_scene_breaks(text: str) -> str:
    """A line holding only '#' is a scene break for writers; Markdown would make it an empty
    heading, so it is rewritten as a rule outside fenced code."""
    out = []
    fence = None
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if m:
            marker = m.group(1)[0]
            if fence is None:
                fence = marker
            elif marker == fence:
                fence = None
        if fence is None and _LONE_HASH.match(line):
            line = "\n* * *\n"
        out.append(line)
    return "\n".join(out)


class _Walker(HTMLParser):
    """Turns markdown-it's HTML into Blocks; unknown tags keep their text."""

    _INLINE = {"em": "italic", "i": "italic", "strong": "bold", "b": "bold", "code": "code"}
    _STRIKE = {"del", "s", "strike"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self.current: Block | None = None
        self.lists: list[dict] = []  # {"ordered", "id", "start", "item_open"}
        self.quote = 0
        self.fmt = {"bold": 0, "italic": 0, "code": 0, "strike": 0}
        self.href: list[str | None] = []
        self.pre: list[str] | None = None
        self.next_list_id = 1
        self.table: list[list[Block]] | None = None
        self.skip = 0  # inside markup that shows nothing (a footnote's back-link)

    # -- blocks ---------------------------------------------------------------------------
    def _open(self, kind: str, level: int = 0) -> Block:
        self._close()
        block = Block(kind=kind, level=level, quote=self.quote)
        top = self.lists[-1] if self.lists else None
        if top is not None and top["item_open"] and kind == "para":
            block.level = len(self.lists)
            if top["first_para_pending"]:  # the item's first paragraph is the item itself
                top["first_para_pending"] = False
                block.kind = "item"
                block.ordered = top["ordered"]
                block.list_id = top["id"]
                block.start = top["start"]
            else:
                block.in_item = True
        self.current = block
        return block

    def _close(self) -> None:
        block = self.current
        self.current = None
        if block is None:
            return
        if block.kind == "cell":  # a cell ended by the next tag: it stays in its row
            _trim(block)
            if self.table:
                self.table[-1].append(block)
            return
        _trim(block)
        if block.spans or block.kind == "heading":
            self.blocks.append(block)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.pre is not None:
            return
        css = dict(attrs).get("class") or ""
        if self.skip or (tag == "a" and "footnote-backref" in css):
            self.skip += tag == "a"
            return
        if not self._start_block(tag, attrs, css):
            self._start_inline(tag, attrs)

    def _start_block(self, tag: str, attrs, css: str) -> bool:
        """A block-level tag opened (a table, paragraph, heading, list, quote, rule or code):
        False when the tag is not one."""
        if tag == "table":
            self._close()
            self.table = []
        elif tag == "tr" and self.table is not None:
            self.table.append([])
        elif tag in ("td", "th") and self.table is not None:
            self._close()
            self.current = Block(kind="cell")
        elif tag == "hr" and "footnotes-sep" in css:
            self._close()
        elif tag in ("p", "div"):
            self._open("para")
        elif len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
            self._open("heading", int(tag[1]))
        elif tag in ("ul", "ol"):
            self._open_list(tag == "ol", dict(attrs).get("start") or "1")
        elif tag == "li":
            self._close()
            if self.lists:
                self.lists[-1]["item_open"] = True
                self.lists[-1]["first_para_pending"] = True
        elif tag == "blockquote":
            self._close()
            self.quote += 1
        elif tag == "hr":
            self._close()
            self.blocks.append(Block(kind="rule", quote=self.quote))
        elif tag == "pre":
            self._close()
            self.pre = []
        else:
            return False
        return True

    def _open_list(self, ordered: bool, start: str) -> None:
        self._close()
        if self.lists:
            self.lists[-1]["first_para_pending"] = False
        self.lists.append(
            {
                "ordered": ordered,
                "id": self.next_list_id,
                "start": int(start) if start.isdigit() else 1,
                "item_open": False,
                "first_para_pending": False,
            }
        )
        self.next_list_id += 1

    def _start_inline(self, tag: str, attrs) -> None:
        """A line break, an image's alt text, a link or a format opened within a block."""
        if tag == "br":
            self._add("\n")
        elif tag == "img":
            alt = dict(attrs).get("alt")
            if alt:
                self._add(alt)
        elif tag == "a":
            href = dict(attrs).get("href")
            self.href.append(None if href and href.startswith("#") else href)  # in-page: text
        elif tag in self._INLINE:
            self.fmt[self._INLINE[tag]] += 1
        elif tag in self._STRIKE:
            self.fmt["strike"] += 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if self.pre is not None:
            if tag == "pre":
                text = "".join(self.pre)
                self.pre = None
                self.blocks.append(Block(kind="code", quote=self.quote, text=text.rstrip("\n")))
            return
        if self.skip:
            self.skip -= tag == "a"
            return
        if tag in ("td", "th") and self.table is not None:
            cell, self.current = self.current or Block(kind="cell"), None
            _trim(cell)
            if self.table:
                self.table[-1].append(cell)
        elif tag == "table" and self.table is not None:
            rows, self.table = [r for r in self.table if r], None
            self.blocks.append(Block(kind="table", quote=self.quote, rows=rows))
        elif tag in ("p", "div") or (len(tag) == 2 and tag[0] == "h" and tag[1] in "123456"):
            self._close()
        elif tag == "li":
            self._close_item()
        elif tag in ("ul", "ol"):
            self._close()
            if self.lists:
                self.lists.pop()
        elif tag == "blockquote":
            self._close()
            self.quote = max(0, self.quote - 1)
        elif tag == "a":
            if self.href:
                self.href.pop()
        elif tag in self._INLINE:
            key = self._INLINE[tag]
            self.fmt[key] = max(0, self.fmt[key] - 1)
        elif tag in self._STRIKE:
            self.fmt["strike"] = max(0, self.fmt["strike"] - 1)

    def _close_item(self) -> None:
        """A list item ends: one that held no paragraph still counts, as an empty item."""
        self._close()
        top = self.lists[-1] if self.lists else None
        if top is not None:
            if top["first_para_pending"]:  # an empty item still counts
                self.blocks.append(
                    Block(
                        kind="item",
                        level=len(self.lists),
                        quote=self.quote,
                        ordered=top["ordered"],
                        list_id=top["id"],
                        start=top["start"],
                    )
                )
            top["item_open"] = False
            top["first_para_pending"] = False

    def handle_data(self, data: str) -> None:
        if self.pre is not None:
            self.pre.append(data)
            return
        if self.skip or (self.table is not None and self.current is None):
            return  # a back-link, or the whitespace between table cells
        # HTML whitespace rules: runs of spaces and newlines show as one space (not in code).
        text = data.replace("\n", " ") if self.fmt["code"] else _SPACES.sub(" ", data)
        if self.current is None:
            if not text.strip():
                return
            self._open("para")
        self._add(text)

    def _add(self, text: str) -> None:
        if self.current is None:
            if text == "\n":
                return
            self._open("para")
        spans = self.current.spans
        if text != "\n" and spans and spans[-1].is_break:
            text = text.lstrip(" ")  # the newline the renderer writes after <br />
            if not text:
                return
        if text != "\n" and spans and spans[-1].text.endswith(" ") and text.startswith(" "):
            text = text.lstrip(" ")
            if not text:
                return
        span = Span(
            text=text,
            bold=self.fmt["bold"] > 0,
            italic=self.fmt["italic"] > 0,
            code=self.fmt["code"] > 0,
            strike=self.fmt["strike"] > 0,
            href=self.href[-1] if self.href else None,
        )
        if spans and _same_format(spans[-1], span) and not spans[-1].is_break and text != "\n":
            spans[-1].text += text
        else:
            spans.append(span)

    def close(self) -> None:
        super().close()
        self._close()


def _trim(block: Block) -> None:
    """Drop the whitespace HTML would not show at the ends of a block."""
    while block.spans and not block.spans[0].is_break and not block.spans[0].text.strip():
        block.spans.pop(0)
    while block.spans and not block.spans[-1].is_break and not block.spans[-1].text.strip():
        block.spans.pop()
    if block.spans:
        block.spans[0].text = block.spans[0].text.lstrip(" ")
        block.spans[-1].text = block.spans[-1].text.rstrip(" ")
    while block.spans and block.spans[-1].is_break:
        block.spans.pop()


def _same_format(a: Span, b: Span) -> bool:
    return (a.bold, a.italic, a.code, a.strike, a.href) == (
        b.bold,
        b.italic,
        b.code,
        b.strike,
        b.href,
    )


class MarkdownParser:
    """Markdown text to blocks (one parser instance serves every section)."""

    def blocks(self, text: str) -> list[Block]:
        html = render_html(mark_scene_breaks(text.replace("\r\n", "\n")))
        walker = _Walker()
        walker.feed(html)
        walker.close()
        return walker.blocks

    def plain(self, text: str) -> str:
        """The visible text of one line of Markdown (for titles): escapes and inline markup
        removed, read as inline text only ('1. Arrival' is a title, not a list item)."""
        walker = _Walker()
        walker.feed(_MD.renderInline(text.replace("\r\n", "\n")))
        walker.close()
        return " ".join(b.plain() for b in walker.blocks).strip()


def parse(text: str) -> list[Block]:
    return MarkdownParser().blocks(text)

"""Manuscript to DOCX with python-docx, in one of three house styles.

novel:      a book look: serif text, first-line indents (none after a heading or a scene
            break), centred chapter headings; scenes carry no heading and are set apart by a
            centred scene break, as in a printed novel.
report:     block paragraphs, headings numbered 1 / 1.1 / 1.1.1 by Word itself (outline
            numbering on the heading styles, so the titles stay clean) and a table-of-contents
            field.
manuscript: Standard Manuscript Format, for agents and publishers: 12 pt Courier New, double
            spaced, 1-inch margins, a header with surname / title / page number, a title page
            with the contact details and the rounded word count, chapters a third down a new
            page, scene breaks as a centred '#'.

Pages: A4 or Letter (by default from the locale), 1-inch margins, page numbers (layout.py).
With a template (a .docx whose styles are used), the template's own styles stay as they are
and only the styles the export needs and the template lacks are added.

Every section body is parsed as Markdown (see mdparse); headings inside a body sit below the
section's own heading level."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import docx
from docx.enum.style import WD_STYLE_TYPE
from docx.enum.text import WD_ALIGN_PARAGRAPH, WD_TAB_ALIGNMENT
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Inches, Pt, RGBColor
from docx.text.paragraph import Paragraph

from swiftwriter.errors import UserError
from swiftwriter.export import ooxml
from swiftwriter.export.docx_package import check_docx_package
from swiftwriter.export.files import write_atomically
from swiftwriter.export.layout import (
    PageSetup,
    add_page_numbers,
    apply_page,
    manuscript_header,
    rounded_word_count,
)
from swiftwriter.export.mdparse import Block, MarkdownParser, Span
from swiftwriter.export.model import (
    BOOK_STYLES,
    Manuscript,
    Section,
    chapter_starts,
    check_text,
    fallback_title,
    opens_with_scene_break,
)
from swiftwriter.words import count_words

STYLES = ("novel", "report", "manuscript")
SCENE_BREAK = "* * *"
MANUSCRIPT_SCENE_BREAK = "#"
MONO = "Courier New"
# Paragraph styles the writer uses, with what each is based on when a template lacks it.
REQUIRED_STYLES = (
    ("Body Text", "Normal"),
    ("Title", "Normal"),
    ("Subtitle", "Normal"),
    ("TOC Heading", "Normal"),
    ("List Paragraph", "Normal"),
    ("List Continue", "Normal"),
    ("List Continue 2", "Normal"),
    ("List Continue 3", "Normal"),
    *((f"Heading {level}", "Normal") for level in range(1, 10)),
)


def export_docx(
    manuscript: Manuscript,
    out: Path | str,
    style: str = "novel",
    page_breaks: bool | None = None,
    strict: bool = False,
    page: PageSetup | None = None,
    template: Path | str | None = None,
    job=None,
) -> int:
    """Write `out`; returns how many control characters were dropped (see model.check_text).
    `page_breaks` None: chapters start new pages in novels and manuscripts, not in reports.
    `job` (an ExportJob) may cancel it between sections and before the file is replaced."""
    clean, removed = check_text(manuscript, strict=strict)
    document = build_document(clean, style, page_breaks, page, template, job)
    write_atomically(out, document.save, job=job)
    return removed


def build_document(
    manuscript: Manuscript,
    style: str = "novel",
    page_breaks: bool | None = None,
    page: PageSetup | None = None,
    template: Path | str | None = None,
    job=None,
):
    if style not in STYLES:
        raise UserError(f"Unknown style '{style}'; choose one of {', '.join(STYLES)}")
    if page_breaks is None:
        page_breaks = style != "report"
    return _Writer(manuscript, style, page_breaks, page or PageSetup(), template, job).run()


def open_template(template: Path | str | None):
    """A fresh document, or the template's styles, margins, headers and footers with its body
    emptied (its text is not the manuscript's); the export sets the paper size."""
    if template is None:
        return docx.Document()
    path = Path(template).expanduser()
    check_docx_package(path, "a template")  # python-docx reads all of it: bombs are refused
    try:
        document = docx.Document(str(path))
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(f"Cannot use {path.name} as a template: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - a broken zip or XML: a clear message instead
        raise UserError(f"{path.name} is not a Word document ({type(exc).__name__})") from exc
    body = document.element.body
    for child in list(body):
        if child.tag != qn("w:sectPr"):
            body.remove(child)
    return document


class _Writer:
    def __init__(
        self, manuscript: Manuscript, style: str, page_breaks: bool, page: PageSetup, template,
        job=None,
    ) -> None:  # fmt: skip
        self.ms = manuscript
        self.check = job.check if job is not None else lambda: None  # Cancel, between sections
        self.style = style
        self.smf = style == "manuscript"
        self.novel = style in BOOK_STYLES  # indented paragraphs, no contents page
        self.page_breaks = page_breaks
        self.page = page
        self.templated = template is not None
        self.doc = open_template(template)
        self.parser = MarkdownParser()
        self.numbering = ooxml.Numbering(self.doc)
        self.break_pending = False  # the next paragraph starts a new page
        self.indent_next = False  # novel: indent only paragraphs that follow a paragraph
        self.text_since_heading = False  # novel: a scene after text gets a scene break
        self.body_serial = 0
        self.written = False  # any paragraph yet (a page break before the first is pointless)
        self.style_ids: dict[str, str] = {}
        self.sect_pr = self.doc.element.body.find(qn("w:sectPr"))
        self.list_nums: dict[tuple[int, int], int] = {}
        self._styles()

    # -- set-up ---------------------------------------------------------------------------
    def _styles(self) -> None:
        # a template's own styles stay as they are; ours are added where it lacks them
        keep = {s.name for s in self.doc.styles} if self.templated else set()
        body, first = self._add_our_styles(keep)
        if self.templated:
            if not self.novel:
                self._number_headings()
            return  # the template's own look
        if self.smf:
            self._manuscript_styles()
        elif self.novel:
            self._novel_styles(body, first)
        else:
            body.paragraph_format.space_after = Pt(6)
            body.paragraph_format.line_spacing = 1.15
            self._number_headings()

    def _add_our_styles(self, keep: set[str]):
        """The styles the writer's text uses, added where missing and given our look unless the
        template has them (`keep`); returns Body Text and First Paragraph."""
        for name, base in REQUIRED_STYLES:
            self._add_style(name, WD_STYLE_TYPE.PARAGRAPH, base)
        body = self.doc.styles["Body Text"]
        if "Body Text" not in keep:
            body.paragraph_format.space_before = Pt(0)
        first = self._add_style("First Paragraph", WD_STYLE_TYPE.PARAGRAPH, "Body Text")
        quote = self._add_style("Block Text", WD_STYLE_TYPE.PARAGRAPH, "Body Text")
        if "Block Text" not in keep:
            quote.paragraph_format.left_indent = Inches(0.5)
            quote.paragraph_format.right_indent = Inches(0.5)
            quote.paragraph_format.first_line_indent = Inches(0)
            quote.paragraph_format.space_after = Pt(6)
        code = self._add_style("Source Code", WD_STYLE_TYPE.PARAGRAPH, "Normal")
        if "Source Code" not in keep:
            ooxml.set_plain_font(code.element.get_or_add_rPr(), MONO)
            code.font.size = Pt(10)
            code.paragraph_format.space_after = Pt(6)
        verbatim = self._add_style("Verbatim Char", WD_STYLE_TYPE.CHARACTER, None)
        if "Verbatim Char" not in keep:
            ooxml.set_plain_font(verbatim.element.get_or_add_rPr(), MONO)
        link = self._add_style("Hyperlink", WD_STYLE_TYPE.CHARACTER, None)
        if "Hyperlink" not in keep:
            link.font.color.rgb = RGBColor(0x05, 0x63, 0xC1)
            link.font.underline = True
        scene = self._add_style("Scene Break", WD_STYLE_TYPE.PARAGRAPH, "Normal")
        if "Scene Break" not in keep:
            scene.paragraph_format.alignment = WD_ALIGN_PARAGRAPH.CENTER
            scene.paragraph_format.space_before = Pt(12)
            scene.paragraph_format.space_after = Pt(12)
        return body, first

    def _novel_styles(self, body, first) -> None:
        """A novel's look: Times, indented 1.5-spaced paragraphs, a title page, centred
        chapter headings."""
        styles = self.doc.styles
        ooxml.set_plain_font(ooxml.default_rpr(self.doc), "Times New Roman")
        styles["Normal"].font.size = Pt(12)
        body.paragraph_format.first_line_indent = Inches(0.5)
        body.paragraph_format.space_after = Pt(0)
        body.paragraph_format.line_spacing = 1.5
        first.paragraph_format.first_line_indent = Inches(0)
        for name, size in (("Title", 28), ("Subtitle", 16)):  # a book's title page
            title = styles[name]
            ooxml.set_plain_font(title.element.get_or_add_rPr(), "Times New Roman")
            title.font.color.rgb = RGBColor(0, 0, 0)
            title.font.size = Pt(size)
            title.font.italic = False
            ooxml.remove_borders(title)
            title.paragraph_format.space_before = Inches(2) if name == "Title" else Pt(12)
        for level in range(1, 10):
            heading = styles[f"Heading {level}"]
            ooxml.set_plain_font(heading.element.get_or_add_rPr(), "Times New Roman")
            heading.font.color.rgb = RGBColor(0, 0, 0)
            if level <= 2:
                heading.paragraph_format.alignment = WD_ALIGN_PARAGRAPH.CENTER
                heading.paragraph_format.space_before = Pt(36)
                heading.paragraph_format.space_after = Pt(24)

    def _number_headings(self) -> None:
        """A report's headings numbered 1 / 1.1 by Word; 'TOC Heading' (based on Heading 1)
        stays unnumbered and out of the table of contents."""
        self.numbering.number_headings(self.doc)
        toc_ppr = self.doc.styles["TOC Heading"].element.get_or_add_pPr()
        toc_ppr.get_or_add_numPr().get_or_add_numId().val = 0
        toc_ppr.get_or_add_outlineLvl().val = 9

    def _manuscript_styles(self) -> None:
        """Standard Manuscript Format: one font, one size, double spacing, indented paragraphs,
        plain centred chapter headings a third down the page."""
        styles = self.doc.styles
        ooxml.set_plain_font(ooxml.default_rpr(self.doc), MONO)
        styles["Normal"].font.size = Pt(12)
        body, first = styles["Body Text"], styles["First Paragraph"]
        for style in (body, first, styles["Scene Break"], styles["Block Text"]):
            style.paragraph_format.line_spacing = 2.0
            style.paragraph_format.space_after = Pt(0)
            style.paragraph_format.space_before = Pt(0)
        body.paragraph_format.first_line_indent = Inches(0.5)
        first.paragraph_format.first_line_indent = Inches(0.5)
        for level in range(1, 10):
            heading = styles[f"Heading {level}"]
            ooxml.set_plain_font(heading.element.get_or_add_rPr(), MONO)
            heading.font.size = Pt(12)
            heading.font.bold = level > 2
            heading.font.italic = False
            heading.font.color.rgb = RGBColor(0, 0, 0)
            heading.paragraph_format.alignment = (
                WD_ALIGN_PARAGRAPH.CENTER if level <= 2 else WD_ALIGN_PARAGRAPH.LEFT
            )
            heading.paragraph_format.space_before = Inches(2) if level <= 2 else Pt(12)
            heading.paragraph_format.space_after = Pt(24)

    def _add_style(self, name: str, kind, base: str | None):
        styles = self.doc.styles
        exists = name in [s.name for s in styles]
        style = styles[name] if exists else styles.add_style(name, kind)
        if base and not (exists and self.templated):
            style.base_style = styles[base]
        return style

    # -- the document ---------------------------------------------------------------------
    def run(self):
        props = self.doc.core_properties
        props.title = self.ms.title
        props.author = self.ms.author
        props.last_modified_by = self.ms.author
        props.comments = "Exported by SwiftWriter"
        now = dt.datetime.now(dt.UTC).replace(microsecond=0, tzinfo=None)
        props.created = props.modified = now
        props.revision = 1
        apply_page(self.doc, self.page, self.smf, margins=not self.templated)
        if self.smf:
            self._manuscript_title_page()
        else:
            self._title_page()
        self.text_since_heading = False
        self._sections()
        if self.page.page_numbers:
            header = manuscript_header(self.ms.author, self.ms.title) if self.smf else ""
            add_page_numbers(self.doc, header)
        return self.doc

    def _manuscript_title_page(self) -> None:
        """Contact details at the top left, the rounded word count at the top right, the title
        and the author's name centred halfway down; the text starts on the next page."""
        words = sum(count_words(s.body) for s in self.ms.sections)
        section = self.doc.sections[0]
        text_width = section.page_width - section.left_margin - section.right_margin
        contact = [line for line in self.page.contact.splitlines() if line.strip()]
        contact = contact or [_one_line(self.ms.author) or "Author"]
        first = self._para("Normal", f"{contact[0]}\t{rounded_word_count(words)}")
        first.paragraph_format.tab_stops.add_tab_stop(text_width, WD_TAB_ALIGNMENT.RIGHT)
        for line in contact[1:]:
            self._para("Normal", line)
        title = self._para("Normal", _one_line(self.ms.title) or "Untitled")
        title.alignment = WD_ALIGN_PARAGRAPH.CENTER
        title.paragraph_format.space_before = Inches(3)
        if self.ms.author.strip():
            by = self._para("Normal", f"by {_one_line(self.ms.author)}")
            by.alignment = WD_ALIGN_PARAGRAPH.CENTER
        self.break_pending = True

    def _title_page(self) -> None:
        if not (self.ms.title.strip() or self.ms.author.strip()):
            if not self.novel:
                self._contents()
            return
        if self.ms.title.strip():
            p = self._para("Title", _one_line(self.ms.title))
            p.alignment = WD_ALIGN_PARAGRAPH.CENTER
        if self.ms.author.strip():
            p = self._para("Subtitle", _one_line(self.ms.author))
            p.alignment = WD_ALIGN_PARAGRAPH.CENTER
        self.break_pending = True
        if not self.novel:
            self._contents()

    def _contents(self) -> None:
        self._para("TOC Heading", "Contents")
        p = self._para("Normal")
        ooxml.add_field(p, 'TOC \\o "1-3" \\h \\z \\u', "Update this field to see the contents.")
        self.break_pending = True

    def _sections(self) -> None:
        counters: dict[str, int] = {}
        sections = self.ms.sections
        for section, chapterish in zip(sections, chapter_starts(sections), strict=True):
            self.check()
            counters[section.kind] = counters.get(section.kind, 0) + 1
            if opens_with_scene_break(section, self.style):
                if self.text_since_heading:
                    self._scene_break()
            else:
                if self.page_breaks and chapterish and self.written:
                    self.break_pending = True
                number = counters[section.kind]
                title = _one_line(fallback_title(section, number))
                self._heading(title, section.level)
            self._body(section)

    def _heading(self, title: str, level: int) -> None:
        p = self._para(f"Heading {min(max(level, 1), 9)}", title)
        if ooxml.first_strong_direction(title) == "rtl":
            ooxml.set_bidi(p)
        self.indent_next = False
        self.text_since_heading = False

    def _scene_break(self) -> None:
        self._para("Scene Break", MANUSCRIPT_SCENE_BREAK if self.smf else SCENE_BREAK)
        self.indent_next = False
        self.text_since_heading = False

    def _body(self, section: Section) -> None:
        self.body_serial += 1  # list ids restart in every body
        for block in self.parser.blocks(section.body):
            if block.kind == "heading":
                p = self._para(f"Heading {min(section.level + block.level, 9)}")
                self._runs(p, block.spans)
                self.indent_next = False
                self.text_since_heading = False
            elif block.kind == "rule":
                self._scene_break()
            elif block.kind == "table":
                self._table(block)
            elif block.kind == "code":
                p = self._para("Source Code")
                run = p.add_run()
                for i, line in enumerate(block.text.split("\n")):
                    if i:
                        run.add_break()
                    run.add_text(line)
                self.indent_next = False
            elif block.kind == "item":
                p = self._para("List Paragraph")
                ilvl = min(block.level, 9) - 1
                if block.ordered:
                    num_id = self._ordered_num(block, ilvl)
                else:
                    num_id = self.numbering.bullet_num
                ooxml.set_list(p, num_id, ilvl)
                self._runs(p, block.spans)
                self.indent_next = False
            else:
                self._paragraph(block)

    def _table(self, block: Block) -> None:
        """A Markdown table as a Word table with a bold header row, in place."""
        width = max(len(row) for row in block.rows)
        table = self.doc.add_table(rows=len(block.rows), cols=width)
        if "Table Grid" in [s.name for s in self.doc.styles]:
            table.style = self.doc.styles["Table Grid"]
        for r, row in enumerate(block.rows):
            for c, cell in enumerate(row):
                p = table.cell(r, c).paragraphs[0]
                self._runs(p, cell.spans)
                if r == 0:
                    for run in p.runs:
                        run.bold = True
        self.written = True
        self.indent_next = False

    def _ordered_num(self, block: Block, ilvl: int) -> int:
        """One numbering instance per Markdown list, so every list counts from its own start."""
        key = (self.body_serial, block.list_id)
        if key not in self.list_nums:
            self.list_nums[key] = self.numbering.new_ordered(ilvl, block.start)
        return self.list_nums[key]

    def _paragraph(self, block: Block) -> None:
        if block.quote:
            style = "Block Text"
        elif block.in_item:
            style = f"List Continue{'' if block.level <= 1 else f' {min(block.level, 3)}'}"
        elif self.novel and not self.indent_next:
            style = "First Paragraph"
        else:
            style = "Body Text"
        p = self._para(style)
        if block.quote > 1:
            p.paragraph_format.left_indent = Inches(0.5 * block.quote)
        self._runs(p, block.spans)
        self.indent_next = not block.quote and not block.in_item

    # -- paragraphs and runs --------------------------------------------------------------
    def _style_id(self, name: str) -> str:
        """Style ids by name, looked up once: python-docx scans all styles on every lookup."""
        sid = self.style_ids.get(name)
        if sid is None:
            sid = self.style_ids[name] = self.doc.styles[name].style_id
        return sid

    def _para(self, style: str, text: str = ""):
        # Insert before the body's final sectPr directly: python-docx's add_paragraph looks
        # for it from the top every time, which grows with the document.
        element = OxmlElement("w:p")
        self.sect_pr.addprevious(element)
        p = Paragraph(element, self.doc._body)
        p._p.style = self._style_id(style)
        if text:
            self._text_run(p, text)
        self.text_since_heading = True
        self.written = True
        if self.break_pending:
            p.paragraph_format.page_break_before = True
            self.break_pending = False
        return p

    @staticmethod
    def _text_run(paragraph, text: str):
        run = paragraph.add_run()
        if "\t" in text or "\n" in text:
            run.text = text  # python-docx turns these into w:tab / w:br
        else:
            run._r.add_t(text)
        return run

    def _runs(self, paragraph, spans: list[Span]) -> None:
        text = "".join(s.text for s in spans)
        rtl = ooxml.first_strong_direction(text) == "rtl"
        if rtl:
            ooxml.set_bidi(paragraph)
        link = None
        link_url = None
        for span in spans:
            if span.is_break:  # its own run, so a link before it does not swallow it
                paragraph.add_run().add_break()
                link = link_url = None
                continue
            run = self._text_run(paragraph, span.text)
            if span.href:
                if link is None or link_url != span.href:
                    link = ooxml.add_hyperlink(paragraph, span.href)
                    link_url = span.href
                link.append(run._r)
                run._r.style = self._style_id("Hyperlink")
            else:
                link = link_url = None
            if span.bold:
                run.bold = True
            if span.italic:
                run.italic = True
            if span.strike:
                run.font.strike = True
            if span.code:
                run._r.style = self._style_id("Verbatim Char")
            if ooxml.is_rtl_only(span.text):
                run.font.rtl = True
                if span.bold:
                    run.font.cs_bold = True
                if span.italic:
                    run.font.cs_italic = True


def _one_line(text: str) -> str:
    return " ".join(text.split())

"""Markdown -> DOCX, read back with python-docx itself (not with this package's importer)."""

from __future__ import annotations

import zipfile

import docx
import pytest
from docx.oxml.ns import qn
from swiftwriter.errors import UserError
from swiftwriter.export import ooxml
from swiftwriter.export.docx_out import export_docx
from swiftwriter.export.model import Manuscript, Section


def read(path):
    return docx.Document(str(path))


def outline(document):
    """(style, text) of every non-empty paragraph, in order."""
    return [(p.style.name, p.text) for p in document.paragraphs if p.text.strip()]


def marked(paragraph):
    """The paragraph's text with italic as *x* and bold as **x**, run by run."""
    out = []
    for run in paragraph.runs:
        text = run.text
        if run.bold:
            text = f"**{text}**"
        if run.italic:
            text = f"*{text}*"
        out.append(text)
    return "".join(out)


def test_report_round_trip_keeps_headings_paragraphs_and_emphasis(manuscript, tmp_path):
    out = tmp_path / "book.docx"
    assert export_docx(manuscript, out, style="report") == 0
    document = read(out)
    body = [
        (style, text)
        for style, text in outline(document)
        if style not in ("Title", "Subtitle", "TOC Heading", "Normal")
    ]
    assert body == [
        ("Heading 1", "Part One"),
        ("Heading 2", "The Storm"),
        ("Body Text", "The night was dark and stormy, and the rain fell hard."),
        ("Body Text", "She opened the door; see the map."),
        ("List Paragraph", "bread"),
        ("List Paragraph", "salt"),
        ("List Paragraph", "coarse"),
        ("List Paragraph", "water"),
        ("List Paragraph", "first"),
        ("List Paragraph", "second"),
        ("Block Text", "A letter, in italics, kept for years."),
        ("Scene Break", "* * *"),
        ("Body Text", "Later that night."),
        ("Scene Break", "* * *"),
        ("Body Text", "Much later."),
        ("Scene Break", "* * *"),
        ("Body Text", "The end of the chapter."),
        ("Heading 3", "Arrival"),
        ("Body Text", "She arrived at dawn."),
        ("Scene Break", "* * *"),  # untitled: set apart, as in Markdown, not 'Untitled'
        ("Body Text", "He was late."),
        ("Heading 2", "Morning"),
        ("Body Text", "Coffee, then work."),
    ]
    paragraphs = {p.text: p for p in document.paragraphs}
    first = paragraphs["The night was dark and stormy, and the rain fell hard."]
    assert marked(first) == "The night was *dark* and **stormy**, and the *rain ****fell**** hard*."
    assert marked(paragraphs["A letter, in italics, kept for years."]) == (
        "A letter, *in italics*, kept for years."
    )
    assert marked(paragraphs["Coffee, then work."]) == "Coffee, then *work*."


def test_lists_are_numbered_and_each_ordered_list_restarts(tmp_path):
    ms = Manuscript(sections=[Section(1, "L", "1. a\n2. b\n\ntext\n\n1. c\n\n- d\n    - e")])
    out = tmp_path / "lists.docx"
    export_docx(ms, out, style="report")
    items = [p for p in read(out).paragraphs if p.style.name == "List Paragraph"]
    num = [(p.text, p._p.pPr.numPr.numId.val, p._p.pPr.numPr.ilvl.val) for p in items]
    assert [n[0] for n in num] == ["a", "b", "c", "d", "e"]
    assert num[0][1] == num[1][1] != num[2][1]  # a new numbering instance for the second list
    assert num[3][2] == 0 and num[4][2] == 1  # nesting keeps its level


def test_code_link_and_line_break(tmp_path):
    ms = Manuscript(
        sections=[
            Section(
                1, "C", "see `x()` at [site](https://e.org)  \nnext\n\n```\nline 1\nline 2\n```"
            )
        ]
    )
    out = tmp_path / "c.docx"
    export_docx(ms, out)
    document = read(out)
    para = next(p for p in document.paragraphs if p.text.startswith("see"))
    assert para.text == "see x() at site\nnext"
    assert [r.style.name for r in para.runs if r.text == "x()"] == ["Verbatim Char"]
    assert [(h.text, h.address) for h in para.hyperlinks] == [("site", "https://e.org")]
    code = next(p for p in document.paragraphs if p.style.name == "Source Code")
    assert code.text == "line 1\nline 2"


def test_novel_style_scenes_indents_and_page_breaks(manuscript, tmp_path):
    out = tmp_path / "novel.docx"
    export_docx(manuscript, out, style="novel", page_breaks=True)
    document = read(out)
    styles = outline(document)
    assert ("Title", "The Long Night") in styles and ("Subtitle", "Ada Writer") in styles
    # Scenes carry no heading: a scene break parts them from the text before.
    assert ("Heading 3", "Arrival") not in styles
    tail = styles[styles.index(("First Paragraph", "The end of the chapter.")) :]
    assert tail[:6] == [
        ("First Paragraph", "The end of the chapter."),
        ("Scene Break", "* * *"),
        ("First Paragraph", "She arrived at dawn."),
        ("Scene Break", "* * *"),
        ("First Paragraph", "He was late."),
        ("Heading 2", "Morning"),
    ]
    # First paragraph after a heading or break is flush; the following ones are indented.
    assert document.styles["Body Text"].paragraph_format.first_line_indent > 0
    assert not document.styles["First Paragraph"].paragraph_format.first_line_indent
    first_body = next(p for p in document.paragraphs if p.text.startswith("The night"))
    assert first_body.style.name == "First Paragraph"
    # Page breaks: before Part One (after the title page) and before each chapter heading.
    breaks = [p.text for p in document.paragraphs if p.paragraph_format.page_break_before]
    assert breaks == ["Part One", "The Storm", "Morning"]


def test_chapters_start_new_pages_in_novels_not_in_reports_unless_asked(manuscript, tmp_path):
    def breaks(**options):
        out = tmp_path / "out.docx"
        export_docx(manuscript, out, **options)
        return [p.text for p in read(out).paragraphs if p.paragraph_format.page_break_before]

    assert breaks(style="novel", page_breaks=False) == ["Part One"]  # the title page's own
    novel = breaks(style="novel")  # on by default for a novel
    assert novel[0] == "Part One" and len(novel) > 1
    report = breaks(style="report")
    assert breaks(style="report", page_breaks=True) != report


def test_report_numbers_headings_and_has_a_toc_field(manuscript, tmp_path):
    out = tmp_path / "report.docx"
    export_docx(manuscript, out, style="report")
    document = read(out)
    fields = [ooxml.field_instructions(p) for p in document.paragraphs]
    assert any("TOC" in f for f in fields)
    for level in (1, 2, 3):
        num_pr = document.styles[f"Heading {level}"].element.pPr.numPr
        assert num_pr is not None and num_pr.ilvl.val == level - 1
    numbering = document.part.numbering_part.element
    heading_lvls = numbering.xpath('.//w:lvl[w:pStyle/@w:val="Heading2"]/w:lvlText/@w:val')
    assert heading_lvls == ["%1.%2"]
    # The novel style leaves headings unnumbered.
    out2 = tmp_path / "novel.docx"
    export_docx(manuscript, out2, style="novel")
    assert read(out2).styles["Heading 1"].element.pPr.numPr is None


def test_core_properties_title_and_author(manuscript, tmp_path):
    out = tmp_path / "p.docx"
    export_docx(manuscript, out)
    props = read(out).core_properties
    assert (props.title, props.author) == ("The Long Night", "Ada Writer")
    assert props.created.year >= 2024


@pytest.mark.parametrize("style", ["novel", "report"])
def test_empty_manuscript_exports_a_valid_document(style, tmp_path):
    out = tmp_path / "empty.docx"
    assert export_docx(Manuscript(), out, style=style) == 0
    document = read(out)
    paragraphs = [(p.style.name, p.text) for p in document.paragraphs]
    if style == "novel":
        assert paragraphs == []  # nothing to show, not even a title page
    else:  # a report keeps its contents field, ready for the first heading
        assert paragraphs == [("TOC Heading", "Contents"),
                              ("Normal", "Update this field to see the contents.")]  # fmt: skip
    with zipfile.ZipFile(out) as z:
        assert z.testzip() is None


def test_emoji_and_right_to_left_text_survive(tmp_path):
    hebrew = "שלום עולם, זהו *סיפור*."
    arabic = "مرحبا بالعالم"
    ms = Manuscript(
        title="Emoji 📚 book",
        author="נעמה",
        sections=[
            Section(1, "פרק ראשון", f"{hebrew}\n\n{arabic}\n\nRocket 🚀 and family 👨‍👩‍👧 and 🇪🇺.")
        ],
    )
    out = tmp_path / "intl.docx"
    export_docx(ms, out)
    document = read(out)
    texts = [p.text for p in document.paragraphs]
    assert "שלום עולם, זהו סיפור." in texts
    assert arabic in texts
    assert "Rocket 🚀 and family 👨‍👩‍👧 and 🇪🇺." in texts
    assert document.core_properties.title == "Emoji 📚 book"
    by_text = {p.text: p for p in document.paragraphs}
    assert ooxml.is_bidi(by_text["שלום עולם, זהו סיפור."])
    assert ooxml.is_bidi(by_text[arabic])
    assert ooxml.is_bidi(by_text["פרק ראשון"])
    assert not ooxml.is_bidi(by_text["Rocket 🚀 and family 👨‍👩‍👧 and 🇪🇺."])
    italic = [r for r in by_text["שלום עולם, זהו סיפור."].runs if r.italic]
    assert [r.text for r in italic] == ["סיפור"]
    assert italic[0].font.rtl and italic[0].font.cs_italic


def test_control_characters_are_dropped_and_counted(tmp_path):
    ms = Manuscript(
        title="T\x07", sections=[Section(1, "A\x00", "bell\x07 here\x1b[0m\n\nok\ttab")]
    )
    out = tmp_path / "ctl.docx"
    assert export_docx(ms, out) == 4
    document = read(out)
    texts = [p.text for p in document.paragraphs]
    assert "bell here[0m" in texts and "ok tab" in texts and "A" in texts
    assert document.core_properties.title == "T"


def test_control_characters_strict_is_one_clear_error(tmp_path):
    ms = Manuscript(sections=[Section(1, "A", "fine\n\nbad \x0c here")])
    out = tmp_path / "ctl.docx"
    with pytest.raises(UserError, match=r"U\+000C in section 1 \(A\), line 3"):
        export_docx(ms, out, strict=True)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # no partial file either


def test_unknown_style_and_missing_folder(tmp_path):
    with pytest.raises(UserError, match="Unknown style"):
        export_docx(Manuscript(), tmp_path / "x.docx", style="poster")
    with pytest.raises(UserError, match="No such folder"):
        export_docx(Manuscript(), tmp_path / "nope" / "x.docx")


def test_body_headings_sit_below_the_section_heading(tmp_path):
    ms = Manuscript(sections=[Section(2, "Chapter", "# Inside\n\ntext")])
    out = tmp_path / "h.docx"
    export_docx(ms, out, style="report")
    styles = [(p.style.name, p.text) for p in read(out).paragraphs if p.text]
    assert ("Heading 2", "Chapter") in styles and ("Heading 3", "Inside") in styles


def test_document_xml_has_no_illegal_characters(tmp_path):
    ms = Manuscript(sections=[Section(1, "x", "a\x01b\ud800c\ufffe")])
    out = tmp_path / "x.docx"
    export_docx(ms, out)
    with zipfile.ZipFile(out) as z:
        xml = z.read("word/document.xml").decode("utf-8")
    assert "abc" in xml
    assert read(out).element.body.find(qn("w:p")) is not None

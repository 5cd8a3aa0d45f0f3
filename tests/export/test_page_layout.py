"""Pages of a DOCX export read back with python-docx: paper size (A4/Letter, from the locale by
default), page numbers, Standard Manuscript Format (font, spacing, header, title page, scene
breaks), and a template whose styles are used."""

from __future__ import annotations

import docx
import pytest
from docx.oxml.ns import qn
from docx.shared import Inches, Mm, Pt
from swiftwriter.errors import UserError
from swiftwriter.export import ooxml
from swiftwriter.export.docx_out import export_docx
from swiftwriter.export.layout import PageSetup, default_page_size, rounded_word_count
from swiftwriter.export.markdown_out import render_markdown
from swiftwriter.export.model import Manuscript, Section


def export(manuscript, tmp_path, **options):
    out = tmp_path / "out.docx"
    export_docx(manuscript, out, **options)
    return docx.Document(str(out))


def test_page_size_and_margins(manuscript, tmp_path):
    a4 = export(manuscript, tmp_path, page=PageSetup(page_size="a4")).sections[0]
    twip = 635  # sizes are stored in twentieths of a point
    assert abs(a4.page_width - Mm(210)) < twip and abs(a4.page_height - Mm(297)) < twip
    letter = export(manuscript, tmp_path, page=PageSetup(page_size="letter")).sections[0]
    assert (letter.page_width, letter.page_height) == (Inches(8.5), Inches(11))
    assert letter.left_margin == letter.top_margin == Inches(1)
    with pytest.raises(UserError, match="page size"):
        export(manuscript, tmp_path, page=PageSetup(page_size="a5"))


def test_the_default_paper_follows_the_locale():
    assert default_page_size({"LANG": "en_US.UTF-8"}) == "letter"
    assert default_page_size({"LANG": "en_GB.UTF-8"}) == "a4"
    assert default_page_size({"LC_PAPER": "fr_CA.UTF-8", "LANG": "de_DE.UTF-8"}) == "letter"
    assert default_page_size({"LANG": "C.UTF-8"}) == "a4"


def test_every_style_numbers_its_pages(manuscript, tmp_path):
    for style in ("novel", "report"):
        footer = export(manuscript, tmp_path, style=style).sections[0].footer.paragraphs[0]
        assert ooxml.field_instructions(footer).strip() == "PAGE", style
    plain = export(manuscript, tmp_path, page=PageSetup(page_numbers=False)).sections[0]
    assert ooxml.field_instructions(plain.footer.paragraphs[0]) == ""


def test_standard_manuscript_format(manuscript, tmp_path):
    contact = "Ada Writer\n12 Harbour Lane\nada@example.org"
    document = export(manuscript, tmp_path, style="manuscript", page=PageSetup("letter", contact))
    section = document.sections[0]
    assert section.left_margin == section.right_margin == Inches(1)
    header = section.header.paragraphs[0]
    assert header.text.startswith("Writer / THE LONG NIGHT / ")
    assert ooxml.field_instructions(header).strip() == "PAGE"
    assert section.different_first_page_header_footer  # no header on the title page
    fonts = ooxml.default_rpr(document).find(qn("w:rFonts"))
    assert fonts.get(qn("w:ascii")) == "Courier New"
    assert document.styles["Normal"].font.size == Pt(12)
    assert document.styles["Body Text"].paragraph_format.line_spacing == 2.0
    texts = [p.text for p in document.paragraphs]
    assert texts[0] == "Ada Writer\tabout 100 words"
    assert texts[1:3] == ["12 Harbour Lane", "ada@example.org"]
    assert "The Long Night" in texts and "by Ada Writer" in texts
    first_text = next(p for p in document.paragraphs if p.text == "Part One")
    assert first_text.paragraph_format.page_break_before  # the text starts on its own page
    assert "#" in texts and "* * *" not in texts  # the manuscript's scene break


def test_word_counts_are_rounded_as_publishers_expect():
    assert rounded_word_count(37) == "about 100 words"
    assert rounded_word_count(4_260) == "about 4,300 words"
    assert rounded_word_count(84_612) == "about 85,000 words"


def test_a_templates_styles_are_used(manuscript, tmp_path):
    template = docx.Document()
    template.styles["Normal"].font.name = "Georgia"
    template.styles["Heading 1"].font.size = Pt(30)
    template.add_paragraph("Template text that must not reach the export")
    path = tmp_path / "house.docx"
    template.save(str(path))
    document = export(manuscript, tmp_path, template=path)
    assert document.styles["Normal"].font.name == "Georgia"
    assert document.styles["Heading 1"].font.size == Pt(30)
    assert "Template text that must not reach the export" not in [
        p.text for p in document.paragraphs
    ]
    assert "The Storm" in [p.text for p in document.paragraphs]
    # a report on the template: its contents heading stays unnumbered
    report = export(manuscript, tmp_path, template=path, style="report")
    toc = report.styles["TOC Heading"].element.pPr
    assert toc.numPr.numId.val == 0 and toc.outlineLvl.val == 9
    # the template's margins and its own page numbers stay; the paper is the one chosen
    numbered = docx.Document()
    numbered.sections[0].left_margin = Inches(1.75)
    ooxml.add_field(numbered.sections[0].footer.paragraphs[0], "PAGE", "1")
    numbered.save(str(tmp_path / "numbered.docx"))
    out = export(manuscript, tmp_path, template=tmp_path / "numbered.docx",
                 page=PageSetup(page_size="letter"))  # fmt: skip
    section = out.sections[0]
    assert section.left_margin == Inches(1.75) and section.page_width == Inches(8.5)
    footer = " ".join(ooxml.field_instructions(p) for p in section.footer.paragraphs)
    assert footer.count("PAGE") == 1
    broken = tmp_path / "broken.docx"
    broken.write_bytes(b"not a zip")
    with pytest.raises(UserError, match="broken.docx"):
        export(manuscript, tmp_path, template=broken)


def test_a_lone_hash_scene_break_becomes_asterisks_in_markdown():
    ms = Manuscript(sections=[Section(1, "One", "First scene.\n\n#\n\nSecond scene.", "chapter")])
    text = render_markdown(ms)
    assert "\n* * *\n" in text and "\n#\n" not in text

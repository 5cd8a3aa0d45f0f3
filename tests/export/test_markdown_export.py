"""Manuscript -> Markdown: headings from the tree, each text's own Markdown kept verbatim."""

from __future__ import annotations

import pytest
from swiftwriter.errors import UserError
from swiftwriter.export.markdown_out import escape_title, export_markdown, render_markdown
from swiftwriter.export.mdparse import MarkdownParser
from swiftwriter.export.model import Manuscript, Section


def test_headings_from_the_tree_and_bodies_verbatim(manuscript):
    text = render_markdown(manuscript, style="report")
    assert text.startswith('---\ntitle: "The Long Night"\nauthor: "Ada Writer"\n---\n\n')
    lines = text.split("\n")
    headings = [line for line in lines if line.startswith("#")]
    assert headings == ["# Part One", "## The Storm", "### Arrival", "## Morning"]
    for section in manuscript.sections:
        # the writer's Markdown, byte for byte, but for a lone '#' scene break, which other
        # Markdown tools would show as an empty heading
        body = section.body.strip("\n").replace("\n#\n", "\n* * *\n")
        assert body in text
    assert "\n#\n" in manuscript.sections[1].body
    # The untitled scene follows a scene break instead of an 'Untitled' heading.
    assert "She arrived at *dawn*.\n\n* * *\n\nHe was **late**." in text
    assert text.endswith("Coffee, then _work_.\n")


def test_titles_are_plain_text(tmp_path):
    title = "Stars *and* [brackets] # 1 <b>"
    escaped = escape_title(title)
    assert escaped == "Stars \\*and\\* \\[brackets\\] \\# 1 &lt;b>"
    assert MarkdownParser().plain(escaped) == title


def test_untitled_chapters_get_numbered_titles():
    ms = Manuscript(
        sections=[Section(1, "", "a", kind="chapter"), Section(1, "", "b", kind="chapter")]
    )
    assert render_markdown(ms) == "# Chapter 1\n\na\n\n# Chapter 2\n\nb\n"


def test_deep_levels_clamp_to_six():
    ms = Manuscript(sections=[Section(8, "Deep", "")])
    assert render_markdown(ms) == "###### Deep\n"


def test_empty_manuscript(tmp_path):
    out = tmp_path / "empty.md"
    assert export_markdown(Manuscript(), out) == 0
    assert out.read_text(encoding="utf-8") == ""
    ms = Manuscript(title="Only a title")
    assert render_markdown(ms) == '---\ntitle: "Only a title"\n---\n'


def test_emoji_rtl_and_control_characters(tmp_path):
    ms = Manuscript(
        title='Quote " and 📚',
        sections=[Section(1, "שלום", "مرحبا 🚀\x07\n\nnext\x00")],
    )
    out = tmp_path / "x.md"
    assert export_markdown(ms, out) == 2
    text = out.read_text(encoding="utf-8")
    assert 'title: "Quote \\" and 📚"' in text
    assert "# שלום\n\nمرحبا 🚀\n\nnext\n" in text
    with pytest.raises(UserError, match="U\\+0007"):
        export_markdown(ms, tmp_path / "strict.md", strict=True)
    assert not (tmp_path / "strict.md").exists()


def test_windows_line_ends_become_unix():
    ms = Manuscript(sections=[Section(1, "A", "one\r\ntwo\r\n")])
    assert render_markdown(ms) == "# A\n\none\ntwo\n"


@pytest.mark.parametrize("style", ["novel", "manuscript", "report"])
def test_markdown_and_word_set_scenes_by_one_rule(manuscript, tmp_path, style):
    """A titled scene in a novel: Word showed only '* * *', Markdown '### Arrival' (issue 63).
    Both formats now ask model.opens_with_scene_break, in every style."""
    import docx
    from swiftwriter.export.request import ExportRequest, export_manuscript

    md, word = tmp_path / "book.md", tmp_path / "book.docx"
    export_manuscript(manuscript, md, ExportRequest(fmt="md", style=style))
    export_manuscript(manuscript, word, ExportRequest(fmt="docx", style=style))
    text = md.read_text(encoding="utf-8")
    md_headings = [line.lstrip("#").strip() for line in text.splitlines() if line[:1] == "#"]
    paragraphs = docx.Document(str(word)).paragraphs
    word_headings = [p.text for p in paragraphs if p.style.name.startswith("Heading")]
    assert md_headings == word_headings
    titled = style == "report"
    assert ("Arrival" in md_headings) == titled and "Untitled" not in md_headings
    breaks = "She arrived at *dawn*.\n\n* * *\n\nHe was **late**."
    assert breaks in text and ("The end of the chapter.\n\n* * *\n\nShe arrived" in text) != titled

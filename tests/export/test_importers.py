"""Import .md, .txt and .docx: sections with levels that make a valid tree, Markdown bodies."""

from __future__ import annotations

import docx
import pytest
from swiftwriter.errors import UserError
from swiftwriter.export.docx_out import export_docx
from swiftwriter.export.importers import import_file, import_manuscript
from swiftwriter.export.markdown_out import export_markdown
from swiftwriter.export.model import Manuscript, Section


def test_markdown_split_at_atx_and_setext_headings(tmp_path):
    source = tmp_path / "notes.md"
    source.write_text(
        "Opening words.\n\n# One #\n\nText *one*.\n\nTwo\n===\n\nbody\n\n## Two *a*\n\n"
        "```\n# not a heading\n```\n\nSub\n---\n\nsub body\n\n#\n\nafter break\n",
        encoding="utf-8",
    )
    assert import_file(source) == [
        (1, "notes", "Opening words."),
        (1, "One", "Text *one*."),
        (1, "Two", "body"),
        (2, "Two a", "```\n# not a heading\n```"),
        (2, "Sub", "sub body\n\n#\n\nafter break"),
    ]


def test_levels_start_at_one_and_never_skip(tmp_path):
    source = tmp_path / "deep.md"
    source.write_text("### A\n\n##### B\n\n### C\n\n#### D\n", encoding="utf-8")
    assert [(lvl, title) for lvl, title, _ in import_file(source)] == [
        (1, "A"),
        (2, "B"),
        (1, "C"),
        (2, "D"),
    ]


def test_markdown_round_trip_with_front_matter(manuscript, tmp_path):
    out = tmp_path / "book.md"
    export_markdown(manuscript, out, style="report")
    back = import_manuscript(out)
    assert (back.title, back.author) == ("The Long Night", "Ada Writer")
    assert [(s.level, s.title) for s in back.sections] == [
        (1, "Part One"),
        (2, "The Storm"),
        (3, "Arrival"),
        (2, "Morning"),
    ]
    storm = back.sections[1].body
    assert storm == manuscript.sections[1].body.strip("\n").replace("\n#\n", "\n* * *\n")
    # The untitled scene joins the one before it, behind a scene break.
    assert back.sections[2].body == "She arrived at *dawn*.\n\n* * *\n\nHe was **late**."


def test_docx_round_trip_gives_the_same_markdown(manuscript, tmp_path):
    out = tmp_path / "book.docx"
    export_docx(manuscript, out, style="report")
    back = import_manuscript(out)
    assert (back.title, back.author) == ("The Long Night", "Ada Writer")
    assert [(s.level, s.title) for s in back.sections] == [
        (1, "Part One"),
        (2, "The Storm"),
        (3, "Arrival"),
        (2, "Morning"),
    ]
    assert back.sections[1].body == (
        "The night was *dark* and **stormy**, and the *rain* ***fell*** *hard*.\n\n"
        "She opened the `door`; see [the map](https://example.org/map).\n\n"
        "- bread\n- salt\n    - coarse\n- water\n\n"
        "1. first\n2. second\n\n"
        "> A letter, *in italics*, kept for years.\n\n"
        "* * *\n\nLater that night.\n\n* * *\n\nMuch later.\n\n* * *\n\nThe end of the chapter."
    )
    # the untitled scene: a scene break in every style, never an 'Untitled' heading
    assert back.sections[2].body == "She arrived at *dawn*.\n\n* * *\n\nHe was **late**."
    assert back.sections[3].body == "Coffee, then *work*."


def test_novel_docx_import_keeps_chapters_and_scene_breaks(manuscript, tmp_path):
    out = tmp_path / "novel.docx"
    export_docx(manuscript, out, style="novel", page_breaks=True)
    sections = import_file(out)
    assert [(lvl, title) for lvl, title, _ in sections] == [
        (1, "Part One"),
        (2, "The Storm"),
        (2, "Morning"),
    ]
    assert sections[1][2].endswith(
        "The end of the chapter.\n\n* * *\n\nShe arrived at *dawn*.\n\n* * *\n\nHe was **late**."
    )


def test_docx_written_by_word_style_tools(tmp_path):
    """Word splits runs freely and uses its own list styles; both must come out clean."""
    document = docx.Document()
    document.add_paragraph("Intro before any heading.")
    document.add_heading("Chapter One", level=1)
    p = document.add_paragraph("It was ")
    p.add_run("very").italic = True
    p.add_run(" ")
    p.add_run("ver").bold = True
    p.add_run("y").bold = True
    p.add_run(" cold 2*3 = 6 and snake_case.")
    document.add_paragraph("milk", style="List Bullet")
    document.add_paragraph("eggs", style="List Bullet")
    document.add_paragraph("- not a list, a dash")
    document.add_paragraph("A quotation.", style="Quote")
    document.add_paragraph("\t\u2042")
    document.add_heading("Deeper", level=3)
    document.add_paragraph("end")
    document.core_properties.title = ""
    out = tmp_path / "word.docx"
    document.save(out)
    assert import_file(out) == [
        (1, "word", "Intro before any heading."),
        (
            1,
            "Chapter One",
            "It was *very* **very** cold 2\\*3 = 6 and snake_case.\n\n- milk\n- eggs\n\n"
            "\\- not a list, a dash\n\n> A quotation.\n\n* * *",
        ),
        (2, "Deeper", "end"),
    ]


def test_emoji_and_rtl_survive_import(tmp_path):
    ms = Manuscript(sections=[Section(1, "פרק 🚀", "שלום *עולם* 👋\n\nمرحبا")])
    out = tmp_path / "intl.docx"
    export_docx(ms, out, style="report")
    assert import_file(out) == [(1, "פרק 🚀", "שלום *עולם* 👋\n\nمرحبا")]


def test_text_files_in_common_encodings(tmp_path):
    utf8 = tmp_path / "a.txt"
    utf8.write_bytes("\ufeffLine one\r\nline two\r\n\r\nCafé ☕\r\n".encode())
    assert import_file(utf8) == [(1, "a", "Line one\nline two\n\nCafé ☕")]
    legacy = tmp_path / "b.txt"
    legacy.write_bytes("caf\u00e9 \u2014 done".encode("cp1252"))
    assert import_file(legacy, encoding="cp1252") == [(1, "b", "café — done")]
    wide = tmp_path / "c.txt"
    wide.write_bytes("hello".encode("utf-16"))  # with its byte-order mark
    assert import_file(wide) == [(1, "c", "hello")]


def test_empty_files_give_one_empty_section(tmp_path):
    for name in ("e.md", "e.txt"):
        (tmp_path / name).write_text("\n\n", encoding="utf-8")
        assert import_file(tmp_path / name) == [(1, "e", "")]
    out = tmp_path / "e.docx"
    export_docx(Manuscript(), out)
    assert import_file(out) == [(1, "e", "")]


def test_import_errors_are_clear(tmp_path):
    with pytest.raises(UserError, match="No such file"):
        import_file(tmp_path / "missing.md")
    odd = tmp_path / "x.pdf"
    odd.write_bytes(b"%PDF")
    with pytest.raises(UserError, match="Cannot import x.pdf"):
        import_file(odd)
    fake = tmp_path / "fake.docx"
    fake.write_text("not a zip", encoding="utf-8")
    with pytest.raises(UserError, match="not a Word"):
        import_file(fake)


def test_a_windows_file_labelled_latin1_keeps_its_quotes_and_dashes(tmp_path):
    """Import drops C1 controls; Windows text read as Latin-1 would be nothing but them."""
    legacy = tmp_path / "old.txt"
    legacy.write_bytes("\u201cQuoted\u201d \u2014 caf\u00e9\u2026".encode("cp1252"))
    expected = [(1, "old", "\u201cQuoted\u201d \u2014 caf\u00e9\u2026")]
    assert import_file(legacy, encoding="latin-1") == expected
    assert import_file(legacy, encoding="cp1252") == expected
    odd = tmp_path / "odd.txt"
    odd.write_bytes(b"caf\xe9 \x81 end")  # 0x81 is unused in Windows-1252: Latin-1 after all
    assert import_file(odd, encoding="latin-1") == [(1, "odd", "caf\u00e9  end")]

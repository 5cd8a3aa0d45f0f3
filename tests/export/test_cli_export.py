"""`swiftwriter export` and manuscript_from_project: what is taken, at which level, and clear
errors for a bad project, document id or file name."""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import docx
import pytest
from lxml import etree
from swiftwriter.cli import main
from swiftwriter.commands.export import choose_format
from swiftwriter.errors import UserError
from swiftwriter.export.model import manuscript_from_project

from tests.export.test_epub_export import NS, read_epub, section_type, text_of


@dataclass
class FakeDoc:
    id: int
    parent_id: int | None
    kind: str
    title: str
    text: str
    position: int
    depth: int


class FakeProject:
    """The store's read API as the exporter uses it (Project.meta, Project.documents())."""

    meta = {"title": "Book", "author": "Me"}

    def documents(self):
        return [
            FakeDoc(1, None, "part", "P1", "", 0, 0),
            FakeDoc(2, 1, "chapter", "C1", "c1 text", 0, 1),
            FakeDoc(3, 2, "scene", "S1", "s1 text", 0, 2),
            FakeDoc(4, 1, "chapter", "C2", "c2 text", 1, 1),
            FakeDoc(5, None, "part", "P2", "", 1, 0),
            FakeDoc(6, 5, "chapter", "C3", "", 0, 1),
        ]


def test_whole_project_keeps_order_levels_and_kinds():
    ms = manuscript_from_project(FakeProject())
    assert (ms.title, ms.author) == ("Book", "Me")
    assert [(s.level, s.title, s.kind, s.id) for s in ms.sections] == [
        (1, "P1", "part", "1"),
        (2, "C1", "chapter", "2"),
        (3, "S1", "scene", "3"),
        (2, "C2", "chapter", "4"),
        (1, "P2", "part", "5"),
        (2, "C3", "chapter", "6"),
    ]


def test_selection_takes_descendants_and_levels_are_relative():
    ms = manuscript_from_project(FakeProject(), ["2", 6])
    assert [(s.level, s.title) for s in ms.sections] == [(1, "C1"), (2, "S1"), (1, "C3")]


def test_unknown_document_id_is_a_user_error():
    with pytest.raises(UserError, match="No document with id 42"):
        manuscript_from_project(FakeProject(), ["42"])


def test_format_from_extension(tmp_path):
    assert choose_format(None, tmp_path / "a.MD") == "md"
    assert choose_format(None, tmp_path / "a.docx") == "docx"
    assert choose_format("md", tmp_path / "a.txt") == "md"
    assert choose_format(None, tmp_path / "a.pdf") == "pdf"  # through LibreOffice
    with pytest.raises(UserError, match="--format"):
        choose_format(None, tmp_path / "a.rtf")


def test_missing_project_is_one_clear_line(tmp_path, capsys):
    code = main(["export", str(tmp_path / "none.swp"), "--out", str(tmp_path / "x.md")])
    assert code == 1
    err = capsys.readouterr().err
    assert "No such project" in err and "Traceback" not in err


def store_project(tmp_path):
    from swiftwriter.store import Project

    path = tmp_path / "novel.swproj"
    proj = Project.create(path, title="Store Book", author="Store Author")
    part = proj.add_document("Part A", "", kind="part")
    ch = proj.add_document(
        "Chapter A", "Hello *there*.\n\n* * *\n\nBye.", parent_id=part.id, kind="chapter"
    )
    proj.add_document("Scene", "Inside the scene.", parent_id=ch.id, kind="scene")
    other = proj.add_document("Chapter B", "Second **chapter**.", parent_id=part.id, kind="chapter")
    proj.close()
    return path, ch.id, other.id


def test_cli_exports_a_store_project_to_both_formats(tmp_path, capsys):
    path, chapter_id, other_id = store_project(tmp_path)
    md = tmp_path / "out.md"
    assert main(["export", str(path), "--format", "md", "--out", str(md)]) == 0
    text = md.read_text(encoding="utf-8")
    assert text.startswith('---\ntitle: "Store Book"\nauthor: "Store Author"\n---')
    assert "# Part A\n\n## Chapter A\n\nHello *there*." in text
    # the novel style (the default), as in Word: the scene is set apart, not titled
    assert "Bye.\n\n* * *\n\nInside the scene." in text and "Scene\n" not in text
    report = tmp_path / "report.md"
    assert main(["export", str(path), "--out", str(report), "--style", "report"]) == 0
    assert "### Scene\n\nInside the scene." in report.read_text(encoding="utf-8")
    out = tmp_path / "out.docx"
    args = ["export", str(path), "--out", str(out), "--style", "report", "--page-breaks"]
    assert main(args) == 0
    document = docx.Document(str(out))
    headings = [p.text for p in document.paragraphs if p.style.name.startswith("Heading")]
    assert headings == ["Part A", "Chapter A", "Scene", "Chapter B"]
    assert document.core_properties.author == "Store Author"
    some = tmp_path / "some.md"
    assert main(["export", str(path), "--out", str(some), "--docs", str(other_id)]) == 0
    assert some.read_text(encoding="utf-8").endswith("# Chapter B\n\nSecond **chapter**.\n")
    assert "Exported 1 document(s)" in capsys.readouterr().out


def test_cli_exports_an_empty_store_project(tmp_path):
    from swiftwriter.store import Project

    path = tmp_path / "empty.swiftwriter"
    Project.create(path).close()
    md, out = tmp_path / "empty.md", tmp_path / "empty.docx"
    assert main(["export", str(path), "--out", str(md)]) == 0
    assert md.read_text(encoding="utf-8") == ""
    assert main(["export", str(path), "--out", str(out), "--style", "report"]) == 0
    document = docx.Document(str(out))
    assert [p.style.name for p in document.paragraphs if p.text] == ["TOC Heading", "Normal"]


def test_cli_export_takes_the_export_dialogs_options(tmp_path, capsys):
    path, chapter_id, other_id = store_project(tmp_path)
    template = docx.Document()
    template.styles["Normal"].font.name = "Garamond"
    template.save(str(tmp_path / "house.docx"))
    out = tmp_path / "submission.docx"
    args = ["export", str(path), "--out", str(out), "--style", "manuscript"]
    args += ["--page-size", "a4", "--docs", f"{chapter_id},{other_id}", "--author", "A. N. Other"]
    args += ["--contact", "A. N. Other | 1 Quay Street | other@example.org", "--no-page-breaks"]
    assert main(args) == 0
    document = docx.Document(str(out))
    texts = [p.text for p in document.paragraphs]
    assert texts[:3] == ["A. N. Other\tabout 100 words", "1 Quay Street", "other@example.org"]
    assert "by A. N. Other" in texts and "Part A" not in texts  # only the chosen documents
    assert document.sections[0].header.paragraphs[0].text.startswith("Other / STORE BOOK / ")
    assert abs(document.sections[0].page_width - docx.shared.Mm(210)) < 635
    chapter_b = next(p for p in document.paragraphs if p.text == "Chapter B")
    assert not chapter_b.paragraph_format.page_break_before  # --no-page-breaks
    styled = tmp_path / "styled.docx"
    args = ["export", str(path), "--out", str(styled), "--template", str(tmp_path / "house.docx")]
    assert main(args) == 0
    assert docx.Document(str(styled)).styles["Normal"].font.name == "Garamond"
    assert "Exported 3 document(s)" in capsys.readouterr().out  # with the scene below


def test_cli_exports_an_epub_with_the_pages_asked_for(tmp_path, capsys):
    path, chapter_id, other_id = store_project(tmp_path)
    out = tmp_path / "book.epub"
    args = ["export", str(path), "--out", str(out), "--copyright", "© 2025 Store Author | All "
            "rights reserved.", "--dedication", "For the readers", "--back-matter",
            "Store Author writes *books*.", "--back-matter-title", "Afterword",
            "--language", "fr-CA"]  # fmt: skip
    assert main(args) == 0
    book = read_epub(out)
    kinds = [section_type(tree) for _, tree in book["spine"]]
    assert kinds == ["titlepage", "copyright-page", "dedication", "part", "chapter", "chapter",
                     "backmatter"]  # fmt: skip
    copyright_page, back = book["spine"][1][1], book["spine"][-1][1]
    assert [p.text for p in copyright_page.xpath("//x:p", namespaces=NS)] == [
        "© 2025 Store Author", "All rights reserved."
    ]  # fmt: skip
    assert text_of(back) == "Afterword Store Author writes books."
    # the novel style: the scene is set apart inside its chapter's file, not titled
    chapter_a = text_of(book["spine"][4][1])
    assert chapter_a == "Chapter A Hello there. * * * Bye. * * * Inside the scene."
    assert book["opf"].xpath("//dc:language/text()", namespaces=NS) == ["fr-CA"]
    assert book["opf"].xpath("//dc:creator/text()", namespaces=NS) == ["Store Author"]
    assert "Exported 4 document(s)" in capsys.readouterr().out
    # the same project: the same identifier, whatever else was chosen
    again = tmp_path / "again.epub"
    assert main(["export", str(path), "--out", str(again), "--no-title-page"]) == 0
    bare = read_epub(again)
    assert [section_type(tree) for _, tree in bare["spine"]][0] == "part"
    ids = []
    for file in (out, again):
        with zipfile.ZipFile(file) as zf:
            opf = etree.fromstring(zf.read("EPUB/content.opf"))
        ids.append(opf.xpath("//dc:identifier/text()", namespaces=NS)[0])
    assert ids[0] == ids[1]


def test_cli_refuses_a_bad_language_in_one_line(tmp_path, capsys):
    path, _, _ = store_project(tmp_path)
    out = tmp_path / "book.epub"
    assert main(["export", str(path), "--out", str(out), "--language", "en_GB!"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'en_GB!' is not a language tag" in err
    assert not out.exists() and "Traceback" not in err


def test_export_help_lists_every_format(capsys):
    from swiftwriter.commands import export as command
    from swiftwriter.export.request import FORMATS

    assert command.FORMATS == FORMATS
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name in ("Markdown", "Word (DOCX)", "EPUB", "ODT", "PDF"):
        assert name in text.split("positional arguments")[0]  # the description says them all
    prose = text.split("--format {")[-1].split("}", 1)[1].split("--out FILE")[0]
    for fmt in FORMATS:
        assert re.search(rf"\b{fmt}\b", prose), fmt  # what --format says, not just its choices
    assert choose_format(None, Path("book.EPUB")) == "epub"

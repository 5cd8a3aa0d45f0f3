"""One Markdown dialect (CommonMark with tables, strikethrough and footnotes, via
markdown-it-py): every tricky input of the corpus parses as a writer means it, and strike,
tables and nested lists survive the round trip Markdown -> DOCX -> Markdown."""

from __future__ import annotations

import pytest
from swiftwriter.export.docx_in import docx_to_manuscript
from swiftwriter.export.docx_out import export_docx
from swiftwriter.export.mdparse import parse
from swiftwriter.export.model import Manuscript, Section

from tests.export.markdown_corpus import CASES


@pytest.mark.parametrize(("name", "text", "check"), CASES, ids=[c[0] for c in CASES])
def test_the_corpus_parses_as_meant(name, text, check):
    assert check(parse(text)), [(b.kind, b.level, b.plain()) for b in parse(text)]


def test_strike_tables_and_nested_lists_survive_the_round_trip_through_docx(tmp_path):
    body = (
        "It was ~~red~~ grey, a literal tilde~ stays.\n\n"
        "| Name | Age |\n| --- | --- |\n| Elena | 34 |\n| Tom *the brother* | 31 |\n\n"
        "- sea\n  - harbour\n    - wall\n- town\n\n"
        "1. first\n   1. inner\n2. second"
    )
    out = tmp_path / "round.docx"
    export_docx(Manuscript("T", "A", [Section(1, "One", body, "chapter")]), out)
    back = docx_to_manuscript(out).sections[-1].body
    blocks = parse(back)
    first = blocks[0]
    assert [s.text for s in first.spans if s.strike] == ["red"]
    assert "tilde~ stays" in first.plain()
    table = next(b for b in blocks if b.kind == "table")
    assert [[c.plain() for c in row] for row in table.rows] == [
        ["Name", "Age"], ["Elena", "34"], ["Tom the brother", "31"]
    ]  # fmt: skip
    items = [(b.level, b.plain(), b.ordered) for b in blocks if b.kind == "item"]
    assert items == [
        (1, "sea", False), (2, "harbour", False), (3, "wall", False), (1, "town", False),
        (1, "first", True), (2, "inner", True), (1, "second", True),
    ]  # fmt: skip


def test_a_word_table_with_a_line_break_and_a_nested_table_imports_as_one_table(tmp_path):
    import docx

    document = docx.Document()
    document.add_heading("One", level=1)
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Name", "Notes"
    table.cell(1, 0).text = "Elena"
    run = table.cell(1, 1).paragraphs[0].add_run("keeps the light")
    run.add_break()
    run.add_text("since 1953")
    inner = table.cell(1, 1).add_table(rows=1, cols=1)
    inner.cell(0, 0).text = "inner"
    path = tmp_path / "table.docx"
    document.save(str(path))
    body = docx_to_manuscript(path).sections[-1].body
    (table_block,) = [b for b in parse(body) if b.kind == "table"]
    rows = [[c.plain() for c in row] for row in table_block.rows]
    assert rows == [["Name", "Notes"], ["Elena", "keeps the light since 1953 inner"]]


def test_imported_titles_keep_what_looks_like_a_list_marker():
    """A heading's text is inline Markdown: '# 1. Arrival' is titled '1. Arrival' (it was
    read as a list item and lost its number), emphasis and escapes are dropped."""
    from swiftwriter.export.importers import markdown_to_manuscript

    text = "# 1. Arrival\n\nThe boat.\n\n## *The* Storm \\#2\n\nRain."
    assert [s.title for s in markdown_to_manuscript(text).sections] == [
        "1. Arrival",
        "The Storm #2",
    ]

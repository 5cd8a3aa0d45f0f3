"""Markdown to blocks: the DOCX writer sees exactly what Python-Markdown parses."""

from __future__ import annotations

from swiftwriter.export.mdparse import parse


def kinds(blocks):
    return [b.kind for b in blocks]


def test_emphasis_strong_and_nesting():
    [block] = parse("a *b **c** d* e")
    spans = [(s.text, s.italic, s.bold) for s in block.spans]
    assert spans == [
        ("a ", False, False),
        ("b ", True, False),
        ("c", True, True),
        (" d", True, False),
        (" e", False, False),
    ]


def test_scene_break_markers_become_rules():
    text = "one\n\n***\n\ntwo\n\n* * *\n\nthree\n\n#\n\nfour\n\n---\n\nfive"
    assert kinds(parse(text)) == [
        "para",
        "rule",
        "para",
        "rule",
        "para",
        "rule",
        "para",
        "rule",
        "para",
    ]


def test_lone_hash_inside_fenced_code_stays_code():
    blocks = parse("```\n#\n# not a heading\n```")
    assert kinds(blocks) == ["code"]
    assert blocks[0].text == "#\n# not a heading"


def test_lists_keep_depth_order_and_start():
    blocks = parse("- a\n- b\n    - c\n\n3. x\n4. y\n\ntext\n\n1. again")
    items = [(b.plain(), b.level, b.ordered, b.start) for b in blocks if b.kind == "item"]
    assert items == [
        ("a", 1, False, 1),
        ("b", 1, False, 1),
        ("c", 2, False, 1),
        ("x", 1, True, 3),
        ("y", 1, True, 3),
        ("again", 1, True, 1),
    ]
    ordered_ids = {b.list_id for b in blocks if b.kind == "item" and b.ordered}
    assert len(ordered_ids) == 2  # each ordered list numbers on its own


def test_loose_list_item_and_continuation():
    blocks = parse("- first\n\n    more of first\n\n- second")
    assert [(b.kind, b.plain(), b.in_item) for b in blocks] == [
        ("item", "first", False),
        ("para", "more of first", True),
        ("item", "second", False),
    ]


def test_quotes_nest_and_headings_keep_level():
    blocks = parse("## Sub\n\n> outer\n>\n> > inner")
    assert [(b.kind, b.level, b.quote, b.plain()) for b in blocks] == [
        ("heading", 2, 0, "Sub"),
        ("para", 0, 1, "outer"),
        ("para", 0, 2, "inner"),
    ]


def test_entities_escapes_code_links_and_breaks():
    [block] = parse("a &amp; b \\*c\\* `x < y` [l](http://e.org)  \nnext")
    assert block.plain() == "a & b *c* x < y l\nnext"
    code = [s for s in block.spans if s.code]
    assert [s.text for s in code] == ["x < y"]
    assert [s.href for s in block.spans if s.href] == ["http://e.org"]


def test_soft_line_breaks_join_with_one_space():
    [block] = parse("one\ntwo\n   three")
    assert block.plain() == "one two three"


def test_empty_text_gives_no_blocks():
    assert parse("") == []
    assert parse("\n\n  \n") == []

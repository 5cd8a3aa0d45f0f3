"""Tricky Markdown a writer types, with what each must become (blocks from export.mdparse).
Shared by the dialect test and resources/dev/markdown_dialects.py, which measured the two
candidate parsers on it."""

from __future__ import annotations


def kinds(blocks):
    return [(b.kind, b.level) for b in blocks]


def texts(blocks):
    return [b.plain() for b in blocks]


CASES = [
    (
        "a list right after a paragraph line",
        "Shopping:\n- eggs\n- milk",
        lambda b: kinds(b) == [("para", 0), ("item", 1), ("item", 1)],
    ),
    (
        "a nested list indented two spaces",
        "- sea\n  - harbour\n- wall",
        lambda b: kinds(b) == [("item", 1), ("item", 2), ("item", 1)],
    ),
    (
        "a nested ordered list indented three spaces",
        "1. first\n   1. inner\n2. second",
        lambda b: kinds(b) == [("item", 1), ("item", 2), ("item", 1)] and b[0].ordered,
    ),
    (
        "strikethrough",
        "It was ~~red~~ grey.",
        lambda b: [s.text for s in b[0].spans if s.strike] == ["red"],
    ),
    (
        "a table",
        "| Name | Age |\n| --- | --- |\n| Elena | 34 |\n| Tom | 31 |",
        lambda b: (
            len(b) == 1
            and b[0].kind == "table"
            and [[c.plain() for c in row] for row in b[0].rows]
            == [["Name", "Age"], ["Elena", "34"], ["Tom", "31"]]
        ),
    ),
    (
        "a footnote",
        "The light failed.[^1]\n\n[^1]: Only once, in 1953.",
        lambda b: "[^1]" not in " ".join(texts(b)) and any("1953" in t for t in texts(b)),
    ),
    (
        "underscores inside words",
        "snake_case_name and _italic_",
        lambda b: [s.text for s in b[0].spans if s.italic] == ["italic"],
    ),
    (
        "a hard line break",
        "line one  \nline two",
        lambda b: len(b) == 1 and any(s.is_break for s in b[0].spans),
    ),
    ("a scene break", "Before.\n\n* * *\n\nAfter.", lambda b: [x.kind for x in b][1] == "rule"),
    ("a lone # scene break", "Before.\n\n#\n\nAfter.", lambda b: [x.kind for x in b][1] == "rule"),
    (
        "fenced code",
        "```\nlet x = 1\n```",
        lambda b: len(b) == 1 and b[0].kind == "code" and b[0].text == "let x = 1",
    ),
    (
        "an ordered list starting at 3",
        "3. three\n4. four",
        lambda b: b[0].ordered and b[0].start == 3,
    ),
    (
        "escaped asterisks",
        r"\*not italic\*",
        lambda b: texts(b) == ["*not italic*"] and not any(s.italic for s in b[0].spans),
    ),
    (
        "a quote holding a list",
        "> Notes:\n>\n> - one\n> - two",
        lambda b: [(x.kind, x.quote) for x in b] == [("para", 1), ("item", 1), ("item", 1)],
    ),
]

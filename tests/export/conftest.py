"""A small manuscript with every construct the exporters handle, shared by the export tests."""

from __future__ import annotations

import pytest
from swiftwriter.export.model import Manuscript, Section

CHAPTER_ONE = """\
The night was *dark* and **stormy**, and the *rain **fell** hard*.

She opened the `door`; see [the map](https://example.org/map).

- bread
- salt
    - coarse
- water

1. first
2. second

> A letter, *in italics*,
> kept for years.

***

Later that night.

* * *

Much later.

#

The end of the chapter.
"""


@pytest.fixture
def manuscript() -> Manuscript:
    return Manuscript(
        title="The Long Night",
        author="Ada Writer",
        sections=[
            Section(1, "Part One", "", kind="part", id="1"),
            Section(2, "The Storm", CHAPTER_ONE, kind="chapter", id="2"),
            Section(3, "Arrival", "She arrived at *dawn*.", kind="scene", id="3"),
            Section(3, "", "He was **late**.", kind="scene", id="4"),
            Section(2, "Morning", "Coffee, then _work_.", kind="chapter", id="5"),
        ],
    )

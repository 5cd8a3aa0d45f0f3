"""The drafter's registry text is cleaned as PROVENANCE.md says (offline: the cleaning steps on
small inputs; the downloads themselves are not run in tests)."""

from __future__ import annotations

import importlib.util
import re

import pytest
from swiftwriter import paths


@pytest.fixture(scope="module")
def corpus():
    path = paths.resources_dir() / "training" / "corpus.py"
    spec = importlib.util.spec_from_file_location("training_corpus", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_hard_wrapped_prose_is_unwrapped_and_verse_keeps_its_lines(corpus):
    text = (
        "Call me Ishmael. Some years ago, never mind how long, having\n"
        "little money in my purse, and a machine-\nreadable soul.\n\n"
        "    Shall I compare thee to a summer's day?\n"
        "    Thou art more lovely and more temperate:\n"
    )
    prose, verse = list(corpus.plain(text))
    assert prose == (
        "Call me Ishmael. Some years ago, never mind how long, having little money in my "
        "purse, and a machine-readable soul."
    )
    assert verse.split("\n") == [
        "Shall I compare thee to a summer's day?",
        "Thou art more lovely and more temperate:",
    ]


def test_a_slice_takes_whole_paragraphs_and_drops_a_dangling_heading(corpus):
    paragraphs = ["A" * 50 + ".", "Chapter 2", "B" * 60 + "."]
    assert corpus.take(paragraphs, 70) == "A" * 50 + "."  # the heading without its text goes
    assert corpus.take(paragraphs, 10_000).count("\n\n") == 2
    with pytest.raises(ValueError, match="not found"):
        corpus.after(r"^CHAPTER 1", "no such start")


def test_every_source_is_listed_with_its_licence(corpus):
    provenance = (paths.resources_dir() / "training" / "PROVENANCE.md").read_text("utf-8")
    for _kind, requirement, _file in corpus.PACKAGES.values():
        name, version = re.split(r"==|=|(?<=.)@", requirement)
        assert name in provenance and version in provenance, requirement

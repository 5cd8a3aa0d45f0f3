"""Fault matrix rows: hostile files given to import and export, each run through the CLI in a
child process with a memory limit and a time bound (shared checks in `common.py`). A
refusal is one line and changes nothing; a file that can be read is read, bounded."""

from __future__ import annotations

import os
import re
import resource
import subprocess
import time
from pathlib import Path

import docx
import pytest
from swiftwriter.store import Project

from tests.export import hostile_docx
from tests.fault_matrix.common import BASE, CLI, check_project, digest, one_line

MEMORY = 1536 << 20  # the child's whole address space: far below what the bombs reached
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def cli(env, *args, timeout: int = 60) -> tuple[subprocess.CompletedProcess, float]:
    """The CLI in a child with at most 1.5 GB of address space; its result and seconds."""
    start = time.monotonic()
    result = subprocess.run([*CLI, *args], env=env, capture_output=True, text=True,
                            timeout=timeout, preexec_fn=_limit_memory)  # fmt: skip
    return result, time.monotonic() - start


def titles(project: Path) -> list[str]:
    with Project.open(project, readonly=True) as p:
        return [d.title for d in p.documents()]


def test_many_parts_just_under_a_megabyte(project, env, tmp_path):
    bomb = hostile_docx.many_parts_bomb(tmp_path / "parts.docx")
    before = digest(bomb)
    result, seconds = cli(env, "project", "import", str(project), str(bomb))
    one_line(result, "refused")
    assert seconds < 20  # start-up included; it reached 2.7 GB and 15 s before
    assert digest(bomb) == before
    check_project(project, [BASE])
    assert titles(project) == ["Chapter 1"]


def test_a_list_level_of_two_hundred_million(project, env, tmp_path):
    source = hostile_docx.with_paragraphs(
        tmp_path / "deep.docx", hostile_docx.list_item("deep item", "200000000")
    )
    result, seconds = cli(env, "project", "import", str(project), str(source))
    assert result.returncode == 0, result.stderr
    assert seconds < 20  # it took 17 s, 3.2 GB and an 801 MB project before
    assert project.stat().st_size < 5 << 20
    check_project(project, [BASE, "deep item"])


@pytest.mark.parametrize("suffix", [".docx", ".md", ".txt"])
def test_a_paragraph_of_300000_spaces(project, env, tmp_path, suffix):
    text = "before" + " " * 300_000 + "after"
    source = tmp_path / f"blank{suffix}"
    if suffix == ".docx":
        d = docx.Document()
        d.add_paragraph(text)
        d.save(str(source))
    else:
        source.write_text(text + "\n")
    result, seconds = cli(env, "project", "import", str(project), str(source))
    assert result.returncode == 0, result.stderr
    assert seconds < 15  # start-up included; the .docx took 52 s before
    check_project(project, [BASE, text])


def test_hostile_templates(project, env, tmp_path):
    bomb = hostile_docx.many_parts_bomb(tmp_path / "house.docx")
    out = tmp_path / "out.docx"
    result, seconds = cli(env, "export", str(project), "--out", str(out), "--template", str(bomb))
    one_line(result, "refused")
    assert seconds < 20 and not out.exists()

    bare = hostile_docx.without_numbering(tmp_path / "bare.docx")
    with Project.open(project) as p:
        p.add_document("Lists", "1. first\n2. second\n\n- a bullet")
    result, _ = cli(env, "export", str(project), "--out", str(out), "--template", str(bare))
    assert result.returncode == 0, result.stderr
    listed = [p.text for p in docx.Document(str(out)).paragraphs if p._p.pPr is not None
              and p._p.pPr.numPr is not None]  # fmt: skip
    assert listed == ["first", "second", "a bullet"]
    check_project(project, [BASE])


def test_control_characters_in_titles_and_names(project, env, tmp_path):
    source = tmp_path / "evil\x1b[31m.md"
    source.write_text(
        "Opening.\n\n# Chap\x1b]0;pwned\x07ter \x1b[31mRed\x1b[0m\n\nbody \x1b[2J\ttab\x7f\n"
    )
    result, _ = cli(env, "project", "import", str(project), str(source))
    assert result.returncode == 0, result.stderr
    assert not CONTROLS.search(result.stdout + result.stderr)
    assert titles(project) == ["Chapter 1", "evil[31m", "Chap]0;pwnedter [31mRed[0m"]
    check_project(project, [BASE, "body [2J\ttab"])
    listing, _ = cli(env, "project", "docs", str(project))
    assert listing.returncode == 0 and not CONTROLS.search(listing.stdout)

    bad = tmp_path / "bad\x1b[2J.txt"
    bad.write_bytes(b"caf\xe9\n")
    result, _ = cli(env, "project", "import", str(project), str(bad))
    one_line(result, "is not UTF-8 text")
    assert not CONTROLS.search(result.stderr) and "\\x1b[2J" in result.stderr


def test_odd_file_names(project, env, tmp_path):
    odd = os.fsencode(tmp_path) + b"/chap\xff.md"
    Path(os.fsdecode(odd)).write_text("Text of an odd name.\n")
    result, _ = cli(env, "project", "import", str(project), os.fsdecode(odd))
    assert result.returncode == 0, result.stderr
    assert titles(project) == ["Chapter 1", "chap\ufffd"]

    result, _ = cli(env, "project", "import", str(project), str(tmp_path / ("n" * 300 + ".md")))
    one_line(result, "too long")

    long_out = tmp_path / ("e" * 240 + ".docx")  # fits, though '.NAME.xxx.partial' would not
    result, _ = cli(env, "export", str(project), "--out", str(long_out))
    assert result.returncode == 0, result.stderr
    assert long_out.is_file() and not list(tmp_path.glob(".*.partial"))

    result, _ = cli(env, "export", str(project), "--out", str(tmp_path / ("f" * 300 + ".docx")))
    one_line(result, "too long")
    check_project(project, [BASE, "Text of an odd name."])

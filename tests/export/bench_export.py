"""Benchmark: export a 100,000-word project to Markdown and DOCX and print the seconds.

    .venv/bin/python tests/export/bench_export.py [--words 100000] [--out DIR]

Not collected by pytest (no test_ prefix). The project is built in the store when it is
available, so the figure includes reading it back; otherwise from a neutral manuscript."""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

from swiftwriter.export.docx_out import export_docx
from swiftwriter.export.importers import import_manuscript
from swiftwriter.export.markdown_out import export_markdown
from swiftwriter.export.model import Manuscript, Section

_VOCABULARY = (
    "the a and of to in was she he it that with for on at as by her his they from but not "
    "night rain door letter road house river light window voice morning silence hand face "
    "walked said turned looked knew thought remembered waited heard opened closed whispered "
    "slowly quietly suddenly again never always almost already once still perhaps"
)
WORDS = _VOCABULARY.split()


def paragraph(rng: random.Random, words: int) -> str:
    out = []
    for i in range(words):
        word = rng.choice(WORDS)
        if i == 0:
            word = word.capitalize()
        roll = rng.random()
        if roll < 0.02:
            word = f"*{word}*"
        elif roll < 0.03:
            word = f"**{word}**"
        out.append(word)
        if i and i % 14 == 0 and i < words - 1:
            out[-1] += ","
    return " ".join(out) + "."


def scene_text(rng: random.Random, words: int) -> str:
    blocks, written = [], 0
    while written < words:
        n = rng.randint(40, 120)
        roll = rng.random()
        if roll < 0.05:
            block = "\n".join(f"- {paragraph(rng, 6)}" for _ in range(3))
        elif roll < 0.08:
            block = "> " + paragraph(rng, n)
        elif roll < 0.10 and blocks:
            block = "* * *"
        else:
            block = paragraph(rng, n)
        blocks.append(block)
        written += len(block.split()) if block != "* * *" else 0
    return "\n\n".join(blocks)


def make_sections(total_words: int, seed: int = 0):
    """(level, kind, title, text) for parts > chapters > scenes, ~total_words in all."""
    rng = random.Random(seed)
    parts, chapters, scenes = 4, 6, 5
    per_scene = total_words // (parts * chapters * scenes)
    out = []
    for p in range(1, parts + 1):
        out.append((1, "part", f"Part {p}", ""))
        for c in range(1, chapters + 1):
            out.append((2, "chapter", f"Chapter {(p - 1) * chapters + c}", ""))
            for s in range(1, scenes + 1):
                title = f"Scene {s}"
                out.append((3, "scene", title, scene_text(rng, per_scene)))
    return out


def build_project(path: Path, sections) -> bool:
    try:
        from swiftwriter.store import Project
    except ImportError:
        return False
    proj = Project.create(path, title="Benchmark Novel", author="Bench Writer")
    parents: dict[int, object] = {}
    batch = getattr(proj, "batch", None)
    ctx = batch() if batch else None
    if ctx is not None:
        ctx.__enter__()
    try:
        for level, kind, title, text in sections:
            parent = parents.get(level - 1)
            doc = proj.add_document(title, text, parent_id=parent.id if parent else None, kind=kind)
            parents[level] = doc
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)
    proj.close()
    return True


def timed(label: str, fn):
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    print(f"{label:44} {seconds:6.2f} s", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--words", type=int, default=100_000)
    parser.add_argument("--out", type=Path, help="folder for the files (default: a temporary one)")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="swiftwriter-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    sections = make_sections(args.words)
    words = sum(len(text.split()) for *_, text in sections)
    print(f"{words} words in {len(sections)} documents -> {out}")

    project = out / "bench.swiftwriter"
    if project.exists():
        project.unlink()
    if timed("build the project in the store", lambda: build_project(project, sections)):
        from swiftwriter.export.model import manuscript_from_project
        from swiftwriter.store import Project

        def read():
            proj = Project.open(project, readonly=True)
            try:
                return manuscript_from_project(proj)
            finally:
                proj.close()

        ms = timed("read it back as a manuscript", read)
    else:
        print("(no swiftwriter.store: exporting a neutral manuscript)")
        ms = Manuscript(
            "Benchmark Novel",
            "Bench Writer",
            [Section(level, title, text, kind=kind) for level, kind, title, text in sections],
        )
    timed("export Markdown", lambda: export_markdown(ms, out / "bench.md"))
    timed(
        "export DOCX, novel style, page breaks",
        lambda: export_docx(ms, out / "novel.docx", page_breaks=True),
    )
    timed("export DOCX, report style", lambda: export_docx(ms, out / "report.docx", style="report"))
    back = timed("import the novel DOCX again", lambda: import_manuscript(out / "novel.docx"))
    print(f"imported {len(back.sections)} sections")
    return 0


if __name__ == "__main__":
    sys.exit(main())

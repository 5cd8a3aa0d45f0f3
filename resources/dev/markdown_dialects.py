"""Measures the two Markdown parsers the project considered on the corpus of tricky inputs
(tests/export/markdown_corpus.py): Python-Markdown with sane_lists, fenced_code, tables and
footnotes, and markdown-it-py (CommonMark) with tables, strikethrough and footnotes. Each
parser's HTML goes through the same walker the DOCX export uses. Prints a table.
Usage: .venv/bin/python resources/dev/markdown_dialects.py"""

from __future__ import annotations

import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import markdown  # noqa: E402
from swiftwriter.export import mdparse  # noqa: E402

from tests.export.markdown_corpus import CASES  # noqa: E402


def python_markdown(text: str) -> str:
    md = markdown.Markdown(extensions=["sane_lists", "fenced_code", "tables", "footnotes"])
    return md.convert(text)


def blocks(render, text: str):
    walker = mdparse._Walker()
    walker.feed(render(mdparse.mark_scene_breaks(text)))
    walker.close()
    return walker.blocks


def main() -> int:
    parsers = {"Python-Markdown": python_markdown, "markdown-it-py": mdparse.render_html}
    print(f"{'case':45} " + " ".join(f"{name:>16}" for name in parsers))
    passed = dict.fromkeys(parsers, 0)
    for name, text, check in CASES:
        row = []
        for parser, render in parsers.items():
            try:
                ok = bool(check(blocks(render, text)))
            except Exception:  # noqa: BLE001 - a crash is a failure of the case
                ok = False
            passed[parser] += ok
            row.append("pass" if ok else "FAIL")
        print(f"{name:45} " + " ".join(f"{r:>16}" for r in row))
    sample = "\n\n".join(text for _, text, _ in CASES) * 50
    for parser, render in parsers.items():
        start = time.perf_counter()
        render(sample)
        ms = 1000 * (time.perf_counter() - start)
        print(f"{parser}: {passed[parser]}/{len(CASES)} cases, {ms:.0f} ms for {len(sample):,} chars")
    return 0


if __name__ == "__main__":
    sys.exit(main())

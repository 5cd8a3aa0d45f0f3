"""Writes resources/help/manual.md, the manual the app's Help menu shows: docs/manual.md with its
pictures named from the top of the checkout (as the Help window finds them), so the two never
differ (tests/ui/test_help.py checks they agree). Usage: .venv/bin/python resources/dev/manual.py"""

from __future__ import annotations

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def manual_from(docs_manual: str) -> str:
    return docs_manual.replace("](../resources/", "](resources/").rstrip() + "\n"


if __name__ == "__main__":
    out = ROOT / "resources" / "help" / "manual.md"
    source = (ROOT / "docs" / "manual.md").read_text(encoding="utf-8")
    out.write_text(manual_from(source), encoding="utf-8")
    print(f"wrote {out}")

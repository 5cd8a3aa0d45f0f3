"""Writes resources/help/manual.md, the manual the app's Help menu shows: the README's sections
for writers ("The app", "Your work is safe", "Where things are kept"), so the two never differ
(tests/ui/test_help.py checks they agree). Usage: .venv/bin/python resources/dev/manual.py"""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
SECTIONS = ("The app", "Your work is safe", "Where things are kept")


def manual_from(readme: str) -> str:
    parts = re.split(r"(?m)^## ", readme)
    chosen = [p for p in parts if p.split("\n", 1)[0].strip() in SECTIONS]
    text = "# SwiftWriter manual\n\n" + "".join("## " + p for p in chosen)
    return text.rstrip() + "\n"


if __name__ == "__main__":
    out = ROOT / "resources" / "help" / "manual.md"
    out.write_text(manual_from((ROOT / "README.md").read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {out}")

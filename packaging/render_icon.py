"""Render resources/swiftwriter.svg to the PNG sizes desktops and installers ask for.

Run after editing the SVG:  QT_QPA_PLATFORM=offscreen .venv/bin/python packaging/render_icon.py
Only the 256 px PNG is kept in resources/; other sizes go where a packager wants them."""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

ROOT = Path(__file__).resolve().parents[1]


def render(svg: Path, out: Path, size: int) -> None:
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"{svg} is not a valid SVG")
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    if not image.save(str(out), "PNG"):
        raise SystemExit(f"could not write {out}")


def main(argv: list[str]) -> int:
    _app = QGuiApplication(argv[:1])
    svg = ROOT / "resources" / "swiftwriter.svg"
    sizes = [int(a) for a in argv[1:]] or [256]
    for size in sizes:
        name = "swiftwriter.png" if size == 256 else f"swiftwriter-{size}.png"
        out = ROOT / "resources" / name if size == 256 else ROOT / "build" / "icons" / name
        out.parent.mkdir(parents=True, exist_ok=True)
        render(svg, out, size)
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

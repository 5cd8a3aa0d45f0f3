"""The Qt binding keeps Python's books straight: PySide6 6.12.0 dropped a reference to None on
every QSyntaxHighlighter.setFormat call under Python 3.11, so highlighting a long document
crashed the app ("deallocating None"). pyproject.toml keeps that version out; this fails if a
binding with the fault comes back."""

from __future__ import annotations

import sys

import pytest
from PySide6.QtGui import QSyntaxHighlighter, QTextCharFormat
from PySide6.QtWidgets import QPlainTextEdit

pytestmark = pytest.mark.skipif(
    sys.version_info >= (3, 12), reason="None is immortal from Python 3.12: nothing to count"
)


class Marking(QSyntaxHighlighter):
    def highlightBlock(self, text):  # noqa: N802 (Qt's name)
        italic = QTextCharFormat()
        italic.setFontItalic(True)
        self.setFormat(0, len(text), italic)


def test_highlighting_a_long_document_leaves_none_alone(qtbot):
    editor = QPlainTextEdit()
    qtbot.addWidget(editor)
    Marking(editor.document())
    before = sys.getrefcount(None)
    editor.setPlainText("\n".join(["line"] * 2000))
    assert sys.getrefcount(None) - before > -100  # 2,000 calls: a leak shows as -2,000


def test_the_apps_highlighter_on_a_novel_sized_text(qtbot):
    from swiftwriter.ui.editor import Editor

    editor = Editor()
    qtbot.addWidget(editor)
    para = "Elena *walked* to the **harbour**, where the boats ~~were~~ lay at anchor. " * 3
    before = sys.getrefcount(None)
    editor.set_text("\n\n".join([para] * 3000))
    assert sys.getrefcount(None) - before > -100

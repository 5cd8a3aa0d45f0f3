"""Ctrl+B / Ctrl+I in the Markdown editor: the selection wrapped in ** / *, taken off again
when it (or the text around it) already has it, an empty pair around the cursor otherwise; and
no shortcut takes a key that word processors use for alignment (Ctrl+E, Ctrl+R)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QTextCursor
from swiftwriter.ui.editor import Editor, qt_len, text_before
from swiftwriter.ui.help import shortcut_rows


@pytest.fixture
def editor(qtbot):
    widget = Editor()
    qtbot.addWidget(widget)
    return widget


def put(editor: Editor, marked: str) -> None:
    """Load `marked`, where [ and ] are the selection and | a bare cursor."""
    text = marked.replace("[", "").replace("]", "").replace("|", "")
    editor.set_text(text)
    cursor = editor.textCursor()  # Qt counts UTF-16 units: an emoji is two
    if "|" in marked:
        cursor.setPosition(qt_len(marked[: marked.index("|")]))
    else:
        cursor.setPosition(qt_len(marked[: marked.index("[")]))
        end = qt_len(text[: marked.index("]") - 1])
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
    editor.setTextCursor(cursor)


def shown(editor: Editor) -> str:
    """The text with the selection (or the cursor) marked as `put` reads it."""
    text, cursor = editor.toPlainText(), editor.textCursor()
    start = len(text_before(text, cursor.selectionStart()))
    end = len(text_before(text, cursor.selectionEnd()))
    if start == end:
        return text[:start] + "|" + text[start:]
    return text[:start] + "[" + text[start:end] + "]" + text[end:]


CASES = [
    ("**", "The [sea] was grey.", "The **[sea]** was grey."),
    ("**", "The **[sea]** was grey.", "The [sea] was grey."),  # off again, markers outside
    ("**", "The [**sea**] was grey.", "The [sea] was grey."),  # off again, markers inside
    ("*", "The [sea ]was grey.", "The *[sea]* was grey."),  # a double-click's space stays out
    ("*", "The *[sea]* was grey.", "The [sea] was grey."),
    ("*", "The **[sea]** was grey.", "The ***[sea]*** was grey."),  # italic is not bold's half
    ("*", "The ***[sea]*** was grey.", "The **[sea]** was grey."),
    ("**", "The ***[sea]*** was grey.", "The *[sea]* was grey."),
    ("**", "The |", "The **|**"),  # an empty pair to type into
    ("**", "The **|**", "The |"),  # pressed again: taken out
    ("*", "The *sea|* was", "The *sea*| was"),  # at the end: typing goes on plain
    ("*", "The **sea|** was", "The **sea*|*** was"),  # bold's end is no italic's end
    ("**", "|*sea*", "**|***sea*"),  # an opening marker after the cursor is not stepped over
    ("*", "A [café 😀] day", "A *[café 😀]* day"),  # positions past a surrogate pair
]


@pytest.mark.parametrize(("marker", "before", "after"), CASES)
def test_emphasis_toggles(editor, marker, before, after):
    put(editor, before)
    editor.toggle_emphasis(marker)
    assert shown(editor) == after


def test_one_undo_step_and_nothing_in_a_read_only_document(editor):
    put(editor, "The [sea] was grey.")
    editor.toggle_emphasis("**")
    editor.undo()
    assert editor.toPlainText() == "The sea was grey."
    editor.setReadOnly(True)
    editor.toggle_emphasis("**")
    assert editor.toPlainText() == "The sea was grey."


def test_ctrl_b_and_ctrl_i_in_the_window(qtbot, window, make_project):
    window.projects.open_project(make_project(docs=(("Chapter 1", "The sea was grey."),)))
    window.activateWindow()
    window.editor.setFocus()
    qtbot.waitUntil(window.editor.hasFocus)
    put(window.editor, "The [sea] was grey.")
    qtbot.keyClick(window.editor, Qt.Key.Key_B, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(window.editor, Qt.Key.Key_I, Qt.KeyboardModifier.ControlModifier)
    assert shown(window.editor) == "The ***[sea]*** was grey."
    window.notes.text.setFocus()  # a note has the keyboard: the manuscript is left alone
    qtbot.waitUntil(window.notes.text.hasFocus)
    window.actions_by_name["bold"].trigger()
    assert window.editor.toPlainText() == "The ***sea*** was grey."


def test_no_shortcut_takes_a_word_processors_alignment_key(window):
    taken = {
        key.toString(): name
        for name, action in window.actions_by_name.items()
        for key in action.shortcuts()
    }
    for key in ("Ctrl+E", "Ctrl+R", "Ctrl+L", "Ctrl+J"):  # centre, right, left, justify
        assert key not in taken, f"{key} is {taken.get(key)}"
    bold = QKeySequence(QKeySequence.StandardKey.Bold).toString()
    italic = QKeySequence(QKeySequence.StandardKey.Italic).toString()
    assert (taken[bold], taken[italic]) == ("bold", "italic")
    assert taken["Ctrl+Alt+Return"] == "regenerate" and taken["Ctrl+Shift+X"] == "export"
    rows = shortcut_rows(window.actions_by_name)  # Help > Keyboard shortcuts
    assert ("Bold", bold) in rows and ("Italic", italic) in rows
    assert ("Regenerate", "Ctrl+Alt+Return") in rows and ("Export", "Ctrl+Shift+X") in rows

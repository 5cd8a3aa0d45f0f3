"""Focus mode (F8) hides the docks and centres the text at a book's measure, then puts back
exactly the docks that were showing; F11 toggles full screen; typewriter scrolling keeps the
cursor's line in the middle and is remembered."""

from __future__ import annotations

from PySide6.QtCore import Qt
from swiftwriter.ui.focus import MEASURE


def visible_docks(window):
    return {name for name, dock in window.docks.items() if dock.isVisible()}


def test_focus_mode_hides_and_restores_the_docks(qtbot, window, make_project):
    window.projects.open_project(make_project())
    window.resize(1400, 900)
    window.docks["notes"].hide()  # the writer's own layout comes back, not a default one
    before = visible_docks(window)
    assert before and "notes" not in before
    window.actions_by_name["focus"].trigger()
    assert window.focus.active and visible_docks(window) == set()
    margins = window.editor.viewportMargins()
    left, right = margins.left(), margins.right()
    column = window.editor.viewport().width()
    chars = column // window.editor.fontMetrics().averageCharWidth()
    assert left == right > 0 and MEASURE <= chars <= MEASURE + 8
    window.actions_by_name["focus"].trigger()
    assert not window.focus.active and visible_docks(window) == before
    assert window.editor.viewportMargins().left() == 0


def test_closing_the_project_leaves_focus_mode(qtbot, window, make_project):
    window.projects.open_project(make_project())
    window.focus.enter()
    window.projects.close_project()
    assert not window.focus.active and not window.actions_by_name["focus"].isChecked()


def test_f11_toggles_full_screen(qtbot, window):
    window.actions_by_name["fullscreen"].trigger()
    assert window.windowState() & Qt.WindowState.WindowFullScreen
    window.actions_by_name["fullscreen"].trigger()
    assert not window.windowState() & Qt.WindowState.WindowFullScreen


def test_typewriter_scrolling_keeps_the_line_in_the_middle(qtbot, window, make_project):
    text = "\n".join(f"Line {i} of the chapter." for i in range(400))
    window.projects.open_project(make_project(docs=(("Long", text),)))
    window.resize(1000, 700)
    editor = window.editor
    action = window.actions_by_name["typewriter"]
    action.trigger()
    assert action.isChecked() and window.settings.typewriter
    cursor = editor.textCursor()
    cursor.setPosition(len(text) // 2)
    editor.setTextCursor(cursor)
    middle = editor.viewport().height() / 2
    line = editor.fontMetrics().height()
    assert abs(editor.cursorRect().center().y() - middle) < line * 1.5
    for _ in range(6):  # writing on, line by line, stays in the middle (not only jumps)
        editor.moveCursor(editor.textCursor().MoveOperation.Down)
    assert abs(editor.cursorRect().center().y() - middle) < line * 1.5
    action.trigger()  # off: the cursor is left where scrolling put it
    assert not window.settings.typewriter

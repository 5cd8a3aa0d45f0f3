"""Steps the app tests share: open a one-document project, run a take, type at the end, and
start a long take at the top of the document (not a test module)."""

from __future__ import annotations

WAIT = 30000


def open_doc(window, make_project, docs=(("Chapter 1", "The sea was grey."),)):
    path = make_project(docs=docs)
    assert window.projects.open_project(path)
    return path


def generate(qtbot, window):
    with qtbot.waitSignal(window.takes.finished, timeout=WAIT) as blocker:
        window.actions_by_name["generate"].trigger()
    qtbot.waitUntil(lambda: not window.takes.busy, timeout=WAIT)
    return blocker.args[0]


def type_text(window, text):
    cursor = window.editor.textCursor()
    cursor.movePosition(cursor.MoveOperation.End)
    cursor.insertText(text)
    window.editor.setTextCursor(cursor)


def start_long_take_at_the_top(qtbot, window, tokens: int = 3000) -> None:
    """A take written before the document's text, running on while the test types after it."""
    window.panel.set_target(tokens, "tokens")
    window.takes.measure_baseline = False
    window.takes.flush_interval = 0.0
    cursor = window.editor.textCursor()
    cursor.setPosition(0)
    window.editor.setTextCursor(cursor)
    window.actions_by_name["generate"].trigger()
    qtbot.waitUntil(lambda: window.stats_dock.tokens_shown >= 10, timeout=WAIT)

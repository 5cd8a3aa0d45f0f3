"""Selection tools in the window: three alternatives of the selected passage side by side,
the chosen one in place of the passage as one edit (one Ctrl+Z), recorded in History."""

from __future__ import annotations

from PySide6.QtGui import QTextCursor

from tests.ui.test_takes import WAIT, open_doc

TEXT = "The sea was grey and the wall was old. She watched the boats come in with the tide."


def select(window, start: int, end: int) -> str:
    cursor = window.editor.textCursor()
    cursor.setPosition(start)
    cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
    window.editor.setTextCursor(cursor)
    return cursor.selectedText()


def written(qtbot, window, tool="describe", instruction=None):
    dialog = window.selection.start(tool, instruction)
    assert dialog is not None
    qtbot.waitUntil(lambda: window.selection.result is not None, timeout=WAIT)
    qtbot.waitUntil(lambda: not window.selection.busy, timeout=WAIT)
    return dialog


def test_alternatives_side_by_side_then_one_edit_undone_by_one_ctrl_z(qtbot, window,
                                                                       make_project, tmp_path):  # fmt: skip
    open_doc(window, make_project, TEXT)
    window.panel.set_target(40, "tokens")
    passage = select(window, 39, len(TEXT))
    dialog = written(qtbot, window)
    texts = [pane.toPlainText() for pane in dialog.panes]
    assert len(texts) == 3 and all(texts), "three alternatives, side by side"
    assert len(set(texts)) == 3, "each with its own seed"
    assert all(button.isEnabled() for button in dialog.use_buttons)
    assert "written together" in dialog.status.text()
    shot = tmp_path / "alternatives.png"
    assert dialog.grab().save(str(shot)) and shot.stat().st_size > 0
    dialog.use_buttons[1].click()
    chosen = window.selection.result.alternatives[1].text
    assert window.editor.toPlainText() == TEXT[:39] + chosen
    window.editor.undo()  # Ctrl+Z
    assert window.editor.toPlainText() == TEXT
    gens = window.project.generations(window.doc_id, with_tokens=True)
    assert len(gens) == 1 and gens[0].text == chosen
    settings = gens[0].settings
    assert settings["tool"] == "describe" and settings["replaced"] == passage
    assert settings["chosen"] == 2 and not settings["sampling"]["greedy"]
    # the snapshot before it holds the passage
    shots = {s.id: s.text for s in window.project.snapshots(window.doc_id)}
    assert shots[gens[0].snapshot_id] == TEXT


def test_the_tools_say_why_they_cannot_run(qtbot, window, make_project):
    open_doc(window, make_project, TEXT)
    window.editor.moveCursor(QTextCursor.MoveOperation.End)  # nothing selected
    assert window.selection.start("rewrite") is None
    assert "Select a passage" in window.statusBar().currentMessage()
    select(window, 0, 10)
    window.loaded_model, model = None, window.loaded_model
    try:
        assert window.selection.start("rewrite") is None
        assert "Load a model" in window.statusBar().currentMessage()
    finally:
        window.loaded_model = model


def test_a_passage_changed_meanwhile_is_not_overwritten(qtbot, window, make_project):
    open_doc(window, make_project, TEXT)
    select(window, 0, 38)
    written(qtbot, window, "custom", "make it tenser")
    cursor = window.editor.textCursor()
    cursor.setPosition(5)
    cursor.insertText("green ")  # the writer edits the passage before choosing
    errors = []
    window.show_error = lambda title, message: errors.append(message)
    assert not window.selection.use(0)
    assert errors and "changed" in errors[0]
    assert "green" in window.editor.toPlainText()
    assert window.project.generations(window.doc_id) == []

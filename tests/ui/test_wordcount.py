"""Word counts and targets: the status bar shows this document, the project and the session
against their targets, with a progress bar; targets live in the project file."""

from __future__ import annotations

from swiftwriter.ui.wordcount import TargetsDialog


def test_status_bar_counts_document_project_and_session(qtbot, window, make_project):
    path = make_project(docs=(("One", "one two three"), ("Two", "four five")))
    window.projects.open_project(path)
    counter = window.word_counter
    qtbot.waitUntil(lambda: counter.label.text() == "3 words · project 5 · session +0")
    assert not counter.bar.isVisible()
    window.editor.moveCursor(window.editor.textCursor().MoveOperation.End)
    window.editor.insertPlainText(" six seven")
    qtbot.waitUntil(lambda: counter.label.text() == "5 words · project 7 · session +2")

    dialog = TargetsDialog(window)
    dialog.document.setValue(10)
    dialog.project.setValue(20)
    dialog.accept()
    assert counter.label.text() == "5 / 10 words · project 7 / 20 · session +2"
    assert counter.bar.isVisible() and counter.bar.value() == 7 and counter.bar.maximum() == 20
    assert counter.bar.text() == "35%"

    window.tree.select(window.tree.ids_in_order()[1])  # another document: its own target
    qtbot.waitUntil(lambda: counter.label.text().startswith("2 words · project 7 / 20"))
    assert counter.label.text().endswith("session +2")
    window.projects.close_project()
    assert counter.label.text() == "" and not counter.bar.isVisible()
    window.projects.open_project(path)  # a new session starts at zero
    qtbot.waitUntil(lambda: counter.label.text().endswith("session +0"))

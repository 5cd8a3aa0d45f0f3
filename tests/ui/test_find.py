"""Find as Word and LibreOffice users expect it: Ctrl+F find, Ctrl+H replace (History moved to
Ctrl+Shift+H), F3 / Shift+F3 again, whole words, F3 walking on into the next document that
holds the phrase, and Find in project listing every match."""

from __future__ import annotations

from PySide6.QtGui import QKeySequence

DOCS = (
    ("Chapter 1", "The sea was grey. The seaside was empty. The sea rose."),
    ("Chapter 2", "Nothing here but wind."),
    ("Chapter 3", "By night the sea came in."),
)


def keys(window, name):
    return [k.toString() for k in window.actions_by_name[name].shortcuts()]


def selection(window):
    cursor = window.editor.textCursor()
    return window.doc_id, cursor.selectionStart(), cursor.selectedText()


def test_shortcuts_are_the_word_processors(window):
    assert keys(window, "replace") == ["Ctrl+H"]
    assert keys(window, "history") == ["Ctrl+Shift+H"]
    assert keys(window, "find_next") == ["F3"] and keys(window, "find_previous") == ["Shift+F3"]
    assert keys(window, "search_project") == ["Ctrl+Shift+F"]
    assert keys(window, "find") == [QKeySequence(QKeySequence.StandardKey.Find).toString()]


def test_ctrl_h_opens_the_bar_at_the_replacement(qtbot, window, make_project):
    window.projects.open_project(make_project(docs=DOCS))
    window.find_bar.find_edit.setText("sea")
    window.actions_by_name["replace"].trigger()
    assert window.find_bar.isVisible() and window.find_bar.replace_edit.hasFocus()


def test_f3_walks_the_matches_through_the_project_and_wraps(qtbot, window, make_project):
    window.projects.open_project(make_project(docs=DOCS))
    ids = window.tree.ids_in_order()
    first, third = ids[0], ids[2]
    window.show_document(first)
    cursor = window.editor.textCursor()
    cursor.setPosition(0)
    window.editor.setTextCursor(cursor)
    window.find_bar.find_edit.setText("sea")
    window.find_bar.whole.setChecked(True)  # "seaside" is skipped
    f3 = window.actions_by_name["find_next"]
    seen = []
    for _ in range(4):
        f3.trigger()
        seen.append(selection(window))
    assert seen == [(first, 4, "sea"), (first, 45, "sea"), (third, 13, "sea"), (first, 4, "sea")]
    window.actions_by_name["find_previous"].trigger()  # Shift+F3 goes back across documents
    assert selection(window) == (third, 13, "sea")


def test_find_in_project_lists_every_match_and_opens_one(qtbot, window, make_project):
    window.projects.open_project(make_project(docs=DOCS))
    window.find_bar.find_edit.setText("sea")
    dialog = window.actions_by_name["search_project"].trigger() or window.open_dialogs[-1]
    rows = [dialog.results.item(i).text() for i in range(dialog.results.count())]
    # a snippet: up to 40 characters each side of the match, on its line, cut at words
    assert rows == [
        "Chapter 1: The [sea] was grey. The seaside was empty. The…",
        "Chapter 1: The sea was grey. The [sea]side was empty. The sea rose.",
        "Chapter 1: …was grey. The seaside was empty. The [sea] rose.",
        "Chapter 3: By night the [sea] came in.",
    ]
    assert dialog.summary.text() == "4 matches in 2 documents"
    dialog.whole.setChecked(True)
    assert len(dialog.search()) == 3
    dialog._open(dialog.results.item(2))
    third = window.tree.ids_in_order()[2]
    assert selection(window) == (third, 13, "sea")
    dialog.close()


def test_shift_f3_from_the_first_document_goes_to_the_last_that_holds_the_phrase(
    qtbot, window, make_project
):
    window.projects.open_project(make_project(docs=DOCS))
    first, _, third = window.tree.ids_in_order()
    window.show_document(first)
    cursor = window.editor.textCursor()
    cursor.setPosition(0)
    window.editor.setTextCursor(cursor)
    window.find_bar.find_edit.setText("sea")
    window.find_bar.whole.setChecked(True)
    window.actions_by_name["find_previous"].trigger()
    assert selection(window) == (third, 13, "sea")

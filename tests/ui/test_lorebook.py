"""The lorebook in the app: the context viewer lists the entries that fired and why; the
lorebook window adds, edits, pins, deletes, filters and imports entries and sets the author's
note, saving as it goes; project search finds entries and opens them."""

from __future__ import annotations

import json

DOCS = (("Chapter 1", "The storm came at dusk.\nElena climbed the tower."),)


def lore_project(make_project):
    from swiftwriter.store import Project

    path = make_project(docs=DOCS, notes=())
    with Project.open(path) as p:
        p.add_lore_entry("Elena", "Elena keeps the harbour light.", keys="Elena", priority=2)
        p.add_lore_entry("Tom", "Tom runs cargo.", keys="Tom")
        p.add_lore_entry("Town", "Aldermouth, a fishing town.", pinned=True)
    return path


def at_end(window) -> None:
    cursor = window.editor.textCursor()
    cursor.movePosition(cursor.MoveOperation.End)
    window.editor.setTextCursor(cursor)


def test_the_viewer_lists_the_entries_that_fired_and_why(qtbot, window, make_project):
    assert window.projects.open_project(lore_project(make_project))
    at_end(window)
    dialog = window.show_context()
    rows = [dialog.fired.item(i).text() for i in range(dialog.fired.count())]
    assert rows[0].startswith('Elena: key "Elena", ') and rows[1].startswith("Town: pinned, ")
    assert len(rows) == 2  # Tom's name is nowhere in the text
    shown = dialog.view.toPlainText()
    assert "Elena keeps the harbour light." in shown and "Tom runs cargo." not in shown
    dialog.close()
    # the cursor before the name: the window holds no "Elena", and her entry is gone
    cursor = window.editor.textCursor()
    cursor.setPosition(10)
    window.editor.setTextCursor(cursor)
    dialog = window.show_context()
    rows = [dialog.fired.item(i).text() for i in range(dialog.fired.count())]
    assert len(rows) == 1 and rows[0].startswith("Town: pinned")
    dialog.close()


def test_the_lorebook_window_edits_saves_and_imports(qtbot, window, make_project, tmp_path):
    assert window.projects.open_project(make_project(notes=()))
    project = window.project
    dialog = window.tools.open_lorebook()
    assert dialog.list.count() == 0 and not dialog.title.isEnabled()
    entry_id = dialog.add_entry()
    dialog.title.setText("Elena Marsh")
    dialog.keys.setText("Elena, the keeper, elena")
    dialog.content.setPlainText("Elena keeps the harbour light.")
    dialog.priority.setValue(7)
    dialog.pinned.setChecked(True)
    dialog.note.setPlainText("Keep it wistful.")
    dialog.depth.setValue(2)
    dialog.budget.setValue(300)
    qtbot.waitUntil(lambda: project.lore_entry(entry_id).priority == 7, timeout=5000)
    saved = project.lore_entry(entry_id)  # saved after a pause, without closing
    assert (saved.title, saved.keys, saved.content, saved.pinned) == (
        "Elena Marsh", ("Elena", "the keeper"), "Elena keeps the harbour light.", True)  # fmt: skip
    assert (project.authors_note.text, project.authors_note.depth) == ("Keep it wistful.", 2)
    assert project.lorebook().budget == 300
    assert dialog.list.item(0).text() == "Elena Marsh  (pinned)"

    good = tmp_path / "st.json"
    good.write_text(json.dumps({"entries": {"0": {"key": ["Tom"], "content": "Tom runs cargo.",
                                                  "comment": "Tom", "order": 1}}}))  # fmt: skip
    assert dialog.import_from(good) == 1 and dialog.status.text() == "Imported 1 entry"
    bad = tmp_path / "bad.json"
    bad.write_text("[" * 5000 + "]" * 5000)
    assert dialog.import_from(bad) == 0
    assert "bad.json nests deeper" in dialog.status.text() and "\n" not in dialog.status.text()
    assert [e.title for e in project.lore_entries()] == ["Elena Marsh", "Tom"]  # nothing added

    dialog.filter.setText("cargo")
    visible = [dialog.list.item(i).text() for i in range(2) if not dialog.list.item(i).isHidden()]
    assert visible == ["Tom"]
    dialog.filter.clear()
    dialog.select(entry_id)
    dialog.keys.setText("k" * 101)  # refused: the form keeps it, and the entry stays chosen
    dialog.select(project.lore_entries()[1].id)
    assert dialog.current_id() == entry_id and dialog.keys.text() == "k" * 101
    assert dialog.status.text().startswith("Not saved: A lorebook key is one line")
    dialog.keys.setText("Elena")
    dialog.title.setText("Elena")  # typed, then the window closed at once: still saved
    dialog.close()
    assert project.lore_entry(entry_id).title == "Elena"
    dialog = window.tools.open_lorebook(entry_id)
    dialog.delete_current()
    assert [e.title for e in project.lore_entries()] == ["Tom"]
    dialog.close()


def test_project_search_finds_an_entry_and_opens_it(qtbot, window, make_project):
    assert window.projects.open_project(lore_project(make_project))
    window.find_bar.find_edit.setText("cargo")
    window.actions_by_name["search_project"].trigger()
    dialog = window.open_dialogs[-1]
    assert [dialog.results.item(i).text() for i in range(dialog.results.count())] == [
        "Lorebook › Tom: Tom runs [cargo]."
    ]
    assert dialog.summary.text() == "1 lorebook entry"
    dialog._open(dialog.results.item(0))
    lorebook = window.open_dialogs[-1]
    assert lorebook.title.text() == "Tom" and lorebook.content.toPlainText() == "Tom runs cargo."
    lorebook.close()
    dialog.close()

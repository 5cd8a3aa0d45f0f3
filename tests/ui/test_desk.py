"""The writing desk without the model: opening projects (welcome, sample, read-only, recovery),
the project tree, notes pinned to the prompt, find and replace, autosave, closing safely."""

from __future__ import annotations

from swiftwriter.store import Project


def test_welcome_then_open_a_project(qtbot, window, make_project):
    assert window.stack.currentWidget() is window.welcome
    path = make_project(docs=(("One", "first text"), ("Two", "second text")))
    assert window.projects.open_project(path)
    assert window.stack.currentIndex() == 1
    assert [window.tree.tree.topLevelItem(i).text(0) for i in range(2)] == ["One", "Two"]
    assert window.editor.toPlainText() == "first text"
    assert window.words_label.text() == "" or "word" in window.words_label.text()
    qtbot.waitUntil(lambda: window.words_label.text().startswith("2 words · project 4"))
    window.tree.tree.setCurrentItem(window.tree.tree.topLevelItem(1))
    assert window.editor.toPlainText() == "second text"
    assert str(path.resolve()) in window.settings.recent_projects()
    assert window.notes.list.count() == 1
    assert window.notes.list.item(0).checkState().name == "Checked"


def test_new_and_sample_projects(qtbot, window, tmp_path):
    assert window.projects.new_project(tmp_path / "Fresh.swiftwriter")
    assert [d.title for d in window.project.documents()] == ["Chapter 1"]
    assert window.projects.open_sample(tmp_path / "samples")
    docs = window.project.documents()
    assert docs[0].kind == "part" and len(docs) == 4
    assert "Aldermouth" in docs[1].text
    assert [n.title for n in window.project.pinned_notes()] == ["Cast", "Setting"]
    assert window.editor.toPlainText() == docs[1].text  # the first page with words on it


def test_tree_add_rename_move_delete_and_undo(qtbot, window, make_project):
    path = make_project(docs=(("A", "a"), ("B", "b"), ("C", "c")))
    window.projects.open_project(path)
    tree, project = window.tree, window.project
    a, b, c = (d.id for d in project.documents())
    tree.select(a)
    new = tree.add_document("Inserted")
    assert [d.title for d in project.documents()] == ["A", "Inserted", "B", "C"]
    tree.rename(new, "Renamed")
    assert project.document(new).title == "Renamed"
    tree.move(c, None, 0)  # what a drop does
    assert [d.title for d in project.documents()] == ["C", "A", "Renamed", "B"]
    tree.move(b, a, 0)  # into another document
    assert project.document(b).parent_id == a
    assert tree.ids_in_order() == [d.id for d in project.documents()]
    tree.select(a)
    asked = []
    window.tree.confirm = lambda title, text: asked.append(text) or False
    tree.delete_current()  # the writer said no
    assert asked and "inside it" in asked[0] and project.document(a)
    window.tree.confirm = lambda title, text: True
    tree.delete_current()
    assert [d.title for d in project.documents()] == ["C", "Renamed"]
    assert window.actions_by_name["undo_delete"].isEnabled()
    window.actions_by_name["undo_delete"].trigger()
    assert {d.title for d in project.documents()} == {"C", "A", "B", "Renamed"}
    assert project.document(b).parent_id == a


def test_drop_in_the_tree_moves_in_the_store(qtbot, window, make_project, monkeypatch):
    """The tree's real drop handler: it reads where Qt put the dragged item and the store
    moves the document there. Qt's own item move is played by hand (a synthetic drop has no
    drag source, so Qt would ignore it): C is dropped as A's first child."""
    from PySide6.QtCore import QMimeData, QPointF, Qt
    from PySide6.QtGui import QDropEvent
    from PySide6.QtWidgets import QTreeWidget

    path = make_project(docs=(("A", "a"), ("B", "b"), ("C", "c")))
    window.projects.open_project(path)
    a, b, c = (d.id for d in window.project.documents())
    tree = window.tree.tree
    dragged = tree.topLevelItem(2)
    tree.setCurrentItem(dragged)

    def qt_moves_the_item(self, event):
        item = self.takeTopLevelItem(self.indexOfTopLevelItem(dragged))
        self.topLevelItem(0).insertChild(0, item)

    monkeypatch.setattr(QTreeWidget, "dropEvent", qt_moves_the_item)
    tree.setCurrentItem(dragged)
    drop = QDropEvent(
        QPointF(5, 5),
        Qt.DropAction.MoveAction,
        QMimeData(),
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    with qtbot.waitSignal(tree.moved, timeout=5000) as moved:
        tree.dropEvent(drop)
    assert moved.args == [c, a, 0]
    qtbot.waitUntil(lambda: window.project.document(c).parent_id == a)
    assert [d.id for d in window.project.documents()] == [a, c, b]


def test_notes_pin_to_the_prompt(qtbot, window, make_project):
    path = make_project(notes=(("Cast", "Elena", False),))
    window.projects.open_project(path)
    note_id = window.notes.current_id()
    window.notes.set_pinned(note_id, True)
    assert [n.title for n in window.project.pinned_notes()] == ["Cast"]
    window.notes.text.setPlainText("Elena Marsh, surveyor")
    window.notes.save()
    assert window.project.note(note_id).text == "Elena Marsh, surveyor"
    added = window.notes.add_note("Places", "Aldermouth", pinned=False)
    assert window.project.note(added).pinned is False


def test_a_new_notes_text_box_takes_what_is_typed(qtbot, window, make_project):
    """+, name the note, click its text box, type: the box stayed disabled and the typing went
    nowhere (issue 63). What a writer types into a new note is stored."""
    from PySide6.QtCore import Qt

    window.projects.open_project(make_project())
    notes = window.notes
    qtbot.mouseClick(notes.add_button, Qt.MouseButton.LeftButton)
    note_id = notes.current_id()
    assert notes.list.count() == 2 and window.project.note(note_id).title == "New note"
    notes.list.currentItem().setText("Places")  # named in place, as a double click edits it
    qtbot.mouseClick(notes.text.viewport(), Qt.MouseButton.LeftButton)
    qtbot.keyClicks(notes.text, "Aldermouth, a fishing town")
    assert notes.save()
    note = window.project.note(note_id)
    assert (note.title, note.text) == ("Places", "Aldermouth, a fishing town")


def test_find_and_replace(qtbot, window, make_project):
    window.projects.open_project(make_project(docs=(("A", "the sea, the Sea, the wall"),)))
    bar = window.find_bar
    window.actions_by_name["find"].trigger()
    assert bar.isVisible()
    bar.find_edit.setText("sea")
    assert bar.find_next()
    assert window.editor.textCursor().selectedText().lower() == "sea"
    bar.replace_edit.setText("harbour")
    assert bar.replace_all() == 2
    assert window.editor.toPlainText() == "the harbour, the harbour, the wall"
    window.editor.undo()  # replace all is one step
    assert window.editor.toPlainText() == "the sea, the Sea, the wall"
    bar.find_edit.setText("nowhere")
    assert not bar.find_next() and bar.status.text() == "Not found"


def test_autosave_after_idle_and_before_closing(qtbot, window, make_project):
    window.projects.open_project(make_project())
    window.autosave_timer.setInterval(200)
    doc_id = window.doc_id
    window.editor.moveCursor(window.editor.textCursor().MoveOperation.End)
    window.editor.insertPlainText(" More.")
    assert window.save_label.text() == "Edited"
    qtbot.waitUntil(lambda: window.project.document(doc_id).text.endswith(" More."), timeout=3000)
    assert window.save_label.text() == "Saved"
    window.autosave_timer.setInterval(60000)
    window.editor.insertPlainText(" Unsaved yet.")
    path = window.project.path
    window.projects.close_project()
    with Project.open(path, readonly=True) as proj:
        assert proj.document(doc_id).text.endswith(" More. Unsaved yet.")


def test_interrupted_generations_are_offered_for_recovery(qtbot, window, make_project):
    path = make_project(docs=(("A", "Start."),))
    proj = Project.open(path)
    doc = proj.documents()[0]
    record = proj.start_generation(doc.id, "h", "tiny", "tok", flush_interval=0)
    record.append(" Saved before the crash.", [5, 6])
    proj._live.clear()  # as if the process had died: nobody owns the streaming row
    proj.close()
    asked = []
    window.ask = lambda title, text: asked.append(text) or True
    window.projects.open_project(path)
    assert asked and "interrupted" in asked[0]
    assert window.project.document(doc.id).text == "Start. Saved before the crash."
    assert window.editor.toPlainText() == "Start. Saved before the crash."
    assert window.project.interrupted_generations() == []


def test_a_second_instance_opens_read_only_and_says_so(qtbot, window, make_project):
    path = make_project()
    holder = Project.open(path)  # "another SwiftWriter"
    try:
        window.projects.open_project(path)
        assert window.project.readonly
        assert window.banner.isVisible() and "Read-only" in window.banner.text()
        assert "another SwiftWriter" in window.banner.text()
        assert window.editor.isReadOnly()
        assert not window.actions_by_name["generate"].isEnabled()
        assert window.takes.generate() is False
    finally:
        window.projects.close_project()
        holder.close()


def test_closing_while_generating_asks_first(qtbot, window, make_project):
    window.projects.open_project(make_project())
    window.panel.set_target(3000, "tokens")
    window.takes.measure_baseline = False
    window.actions_by_name["generate"].trigger()
    qtbot.waitUntil(lambda: window.stats_dock.tokens_shown > 5, timeout=30000)
    questions = []
    window.ask = lambda title, text: questions.append(text) or False
    window.close()
    assert questions and "generation is running" in questions[0].lower()
    assert window.isVisible() and window.project is not None
    window.ask = lambda title, text: True
    doc_id = window.doc_id
    path = window.project.path
    window.close()
    assert not window.isVisible() and window.project is None
    with Project.open(path, readonly=True) as proj:
        gen = proj.generations(doc_id)[-1]
        assert gen.status == "cancelled"
        assert proj.document(doc_id).text.endswith(gen.text)


def test_keyboard_generate_and_find_bar_escape(qtbot, window, make_project):
    from PySide6.QtCore import Qt

    window.projects.open_project(make_project())
    window.takes.measure_baseline = False
    window.panel.set_target(10, "tokens")
    window.editor.setFocus()
    with qtbot.waitSignal(window.takes.finished, timeout=30000):
        qtbot.keyClick(window.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: not window.takes.busy, timeout=30000)
    assert len(window.project.generations()) == 1
    window.actions_by_name["find"].trigger()
    assert window.find_bar.isVisible()
    qtbot.keyClick(window.find_bar.find_edit, Qt.Key.Key_Escape)
    assert not window.find_bar.isVisible()


def test_window_layout_and_recent_projects_are_remembered(qtbot, window, make_project):
    from swiftwriter.ui.main_window import MainWindow

    path = make_project()
    window.projects.open_project(path)
    window.resize(1000, 640)
    qtbot.waitUntil(lambda: window.size().height() == 640)
    window.close()
    again = MainWindow(load_model=False)
    qtbot.addWidget(again)
    assert again.size().height() == 640  # not the default 820
    assert again.welcome.recent.count() == 1
    assert again.welcome.recent.item(0).data(256) == str(path.resolve())


def test_markdown_is_lightly_highlighted(qtbot, window, make_project):
    from PySide6.QtGui import QFont

    window.projects.open_project(
        make_project(docs=(("A", "# Heading\n\nSome *soft* words.\n\n* * *"),))
    )
    doc = window.editor.document()

    def formats(block_no):
        return doc.findBlockByNumber(block_no).layout().formats()

    heading = formats(0)
    assert heading and heading[0].format.fontWeight() == QFont.Weight.Bold
    assert heading[0].start == 0 and heading[0].length == len("# Heading")
    italic = formats(2)
    assert any(f.format.fontItalic() and f.length == len("*soft*") for f in italic)
    assert formats(4)  # the scene break is muted
    assert window.editor.toPlainText() == "# Heading\n\nSome *soft* words.\n\n* * *"  # untouched


def test_the_window_opens_the_project_it_is_given(qtbot, make_project):
    from swiftwriter.ui.main_window import MainWindow

    path = make_project(docs=(("Only", "given on the command line"),))
    win = MainWindow(load_model=False, project=path)
    qtbot.addWidget(win)
    assert win.project is not None and win.project.path == path
    assert win.editor.toPlainText() == "given on the command line"
    assert win.takes.generate() is False  # no model yet: a message, not a crash
    assert "not loaded" in win.statusBar().currentMessage()
    win.projects.close_project()


def test_no_two_actions_share_a_shortcut(qtbot, window):
    """An ambiguous shortcut fires neither action (Qt's rule), so each key does one thing."""
    from PySide6.QtGui import QAction

    owners: dict[str, list[str]] = {}
    for action in window.findChildren(QAction):
        for key in action.shortcuts():
            if key.toString():
                owners.setdefault(key.toString(), []).append(action.text())
    assert {k: v for k, v in owners.items() if len(v) > 1} == {}
    assert "Ctrl+Return" in owners and "Esc" in owners


def test_the_highlighter_reads_the_export_dialect(qtbot, window, make_project):
    """What the editor shows is what exports: strikethrough is struck, a word_with_underscores
    is no emphasis, a quote is muted."""
    text = "It was ~~red~~ grey.\n\nsnake_case_name stays plain.\n\n> a quote"
    window.projects.open_project(make_project(docs=(("A", text),)))
    doc = window.editor.document()

    def formats(block_no):
        return doc.findBlockByNumber(block_no).layout().formats()

    struck = [f for f in formats(0) if f.format.fontStrikeOut()]
    assert [(f.start, f.length) for f in struck] == [(7, len("~~red~~"))]
    assert not any(f.format.fontItalic() for f in formats(2))
    assert formats(4) and all(f.format.fontItalic() for f in formats(4))

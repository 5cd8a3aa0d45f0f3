"""Never lose typed text: a failed save blocks closing and switching until the writer decides,
keeps an emergency copy that is offered back, autosave runs during takes (the take's span left
out) and on a deadline from the first change, backups on close and from File > Backups."""

from __future__ import annotations

import pytest
from swiftwriter.store import Project, ProjectError
from swiftwriter.store import backups as backups_mod
from swiftwriter.ui import safekeeping

from tests.ui.desk import WAIT, open_doc, start_long_take_at_the_top, type_text


@pytest.fixture
def failing_saves(monkeypatch):
    """Every document save fails, as on a full disk, until `.heal()`."""

    class Switch:
        failing = True

        def heal(self):
            self.failing = False

    switch = Switch()
    real = Project.update_text

    def update_text(self, doc_id, text):
        if switch.failing:
            raise ProjectError("Could not save to Novel.swiftwriter (database or disk is full)")
        return real(self, doc_id, text)

    monkeypatch.setattr(Project, "update_text", update_text)
    return switch


def test_closing_after_a_failed_save_asks_and_cancel_keeps_the_text(
    qtbot, window, make_project, failing_saves
):
    open_doc(window, make_project)
    type_text(window, " Unsaved words.")
    asked = []
    window.choose = lambda title, text, choices: asked.append(text) or "Cancel"
    assert not window.projects.close_project()
    assert window.project is not None and "disk is full" in asked[0]
    assert window.editor.toPlainText().endswith("Unsaved words.")
    copies = safekeeping.emergency_copies(window.project.path)
    assert [c.text for c in copies] == ["The sea was grey. Unsaved words."]
    failing_saves.heal()
    project_path = window.project.path
    window.choose = lambda title, text, choices: pytest.fail("nothing should be asked now")
    assert window.projects.close_project()  # the save inside close succeeds now
    assert safekeeping.emergency_copies(project_path) == []  # the saved text replaced it


def test_retry_save_as_and_discard(qtbot, window, make_project, failing_saves, tmp_path):
    path = open_doc(window, make_project)
    type_text(window, " Second sentence.")
    answers = iter(["Retry", "Save text as…"])
    window.choose = lambda title, text, choices: next(answers)
    out = tmp_path / "rescued.txt"
    window.ask_save_path = lambda: str(out)
    assert window.projects.close_project()
    assert out.read_text(encoding="utf-8") == "The sea was grey. Second sentence."
    with Project.open(path, readonly=True) as p:
        assert p.documents()[0].text == "The sea was grey."  # the disk never took it

    window.choose = lambda title, text, choices: "Not now"  # the copy of the refused text
    assert window.projects.open_project(path)
    type_text(window, " Thrown away.")
    window.choose = lambda title, text, choices: "Discard changes"
    assert window.projects.close_project()


def test_switching_documents_after_a_failed_save_stays_on_cancel(
    qtbot, window, make_project, failing_saves
):
    open_doc(window, make_project, docs=(("One", "First."), ("Two", "Second.")))
    first = window.doc_id
    type_text(window, " More.")
    window.choose = lambda title, text, choices: "Cancel"
    other = [d.id for d in window.project.documents() if d.id != first][0]
    window.show_document(other)
    assert window.doc_id == first and window.editor.toPlainText() == "First. More."


def test_an_emergency_copy_is_offered_back_on_the_next_open(
    qtbot, window, make_project, failing_saves
):
    path = open_doc(window, make_project)
    type_text(window, " Words the disk refused.")
    window.choose = lambda title, text, choices: "Discard changes"
    assert window.projects.close_project()
    failing_saves.heal()
    offered = []
    window.choose = lambda title, text, choices: offered.append(text) or choices[0]
    assert window.projects.open_project(path)
    assert "could not be saved" in offered[0]
    titles = [d.title for d in window.project.documents()]
    assert titles == ["Chapter 1", "Chapter 1 (recovered)"]
    recovered = window.project.documents()[1]
    assert recovered.text == "The sea was grey. Words the disk refused."
    assert safekeeping.emergency_copies(path) == []


def test_autosave_has_a_deadline_from_the_first_change(qtbot, window, make_project):
    path = open_doc(window, make_project)
    window.autosave_timer.setInterval(300)
    type_text(window, " a")
    for word in "bcdefgh":  # typing without a pause as long as the interval
        qtbot.wait(100)
        type_text(window, f" {word}")
    with Project.open(path, readonly=True) as p:  # saved before the typing stopped
        assert p.documents()[0].text.startswith("The sea was grey. a b")


def test_edits_during_a_take_are_saved_without_the_take(qtbot, window, make_project):
    path = open_doc(window, make_project)
    start_long_take_at_the_top(qtbot, window)
    type_text(window, " Typed during the take.")
    window.safekeeping.save_now(force=True)  # Ctrl+S mid-take
    with Project.open(path, readonly=True) as p:
        stored = p.documents()[0].text
    assert stored == "The sea was grey. Typed during the take."  # no half take in it
    window.takes.stop()
    qtbot.waitUntil(lambda: not window.takes.busy, timeout=WAIT)
    final = window.editor.toPlainText()
    assert final.endswith("The sea was grey. Typed during the take.")
    with Project.open(path, readonly=True) as p:
        assert p.documents()[0].text == final


def test_a_backup_is_made_on_close_and_restored_from_the_dialog(
    qtbot, window, make_project, tmp_path
):
    path = open_doc(window, make_project)
    assert window.projects.close_project()
    (made,) = backups_mod.list_backups(path)
    assert window.projects.open_project(path)
    dialog = safekeeping.BackupsDialog(window, path)
    qtbot.addWidget(dialog)
    assert dialog.list.count() == 1 and dialog.restore_button.isEnabled()
    target = tmp_path / "Restored"
    dialog.ask_new_path = lambda suggestion: str(target)
    opened = []
    dialog.restored.connect(opened.append)
    assert dialog.restore_selected() == str(target) + ".swiftwriter"
    assert opened == [str(target) + ".swiftwriter"]
    with Project.open(opened[0], readonly=True) as p:
        assert p.documents()[0].text == "The sea was grey."


def test_closing_while_a_take_will_not_stop_keeps_the_project_open_and_saved(
    qtbot, window, make_project, monkeypatch
):
    path = open_doc(window, make_project)
    start_long_take_at_the_top(qtbot, window)
    type_text(window, " Typed.")
    monkeypatch.setattr(window.takes, "wait", lambda ms=30000: False)  # it will not stop
    assert not window.projects.close_project()
    assert window.project is not None and "not stopped yet" in window.last_error
    with Project.open(path, readonly=True) as p:  # the typed text is saved (the take may
        assert "The sea was grey. Typed." in p.documents()[0].text  # have joined meanwhile)
    monkeypatch.undo()
    window.takes.stop()
    qtbot.waitUntil(lambda: not window.takes.busy, timeout=WAIT)


def test_a_note_typed_just_before_adding_another_is_kept(qtbot, window, make_project):
    """Typing in a note and clicking + within the save delay: the list reloads for the new
    note, and the typed text must be stored first (it used to be dropped)."""
    from PySide6.QtCore import Qt

    path = open_doc(window, make_project)
    notes = window.notes
    note_id = notes.current_id()
    notes.text.setFocus()
    notes.text.moveCursor(notes.text.textCursor().MoveOperation.End)
    qtbot.keyClicks(notes.text, ", harbourmaster")
    assert notes._save_timer.isActive()  # the debounced save has not run yet
    qtbot.mouseClick(notes.add_button, Qt.MouseButton.LeftButton)
    assert notes.current_id() != note_id and notes.list.count() == 2
    assert window.project.note(note_id).text == "Elena Marsh, harbourmaster"
    qtbot.wait(1000)  # the save delay passes: nothing overwrites it
    qtbot.keyClicks(notes.text, "a note deleted at once")
    notes.delete_current()  # its text goes with it: no failed save, no emergency copy
    assert notes.current_id() == note_id and window.last_error == ""
    assert safekeeping.emergency_copies(path) == []
    window.projects.close_project()
    with Project.open(path, readonly=True) as p:
        assert p.note(note_id).text == "Elena Marsh, harbourmaster"


def test_not_now_keeps_an_emergency_copy_and_only_a_confirmed_discard_deletes_it(
    qtbot, window, make_project, failing_saves
):
    path = open_doc(window, make_project)
    type_text(window, " Words the disk refused.")
    window.choose = lambda title, text, choices: "Discard changes"
    assert window.projects.close_project()
    failing_saves.heal()
    offers, confirms = [], []

    def reopen(choice: str, confirm: bool) -> list[str]:
        window.choose = lambda title, text, choices: offers.append(text) or choice
        window.ask = lambda title, text: confirms.append(text) or confirm
        assert window.projects.open_project(path)
        titles = [d.title for d in window.project.documents()]
        assert window.projects.close_project()
        return titles

    assert reopen("Not now", False) == ["Chapter 1"]
    assert len(safekeeping.emergency_copies(path)) == 1  # kept: offered again next time
    assert reopen("Discard…", False) == ["Chapter 1"]  # the confirmation said no
    assert "could not be saved" in offers[1] and "for good" in confirms[-1]
    assert [c.text for c in safekeeping.emergency_copies(path)] == [
        "The sea was grey. Words the disk refused."
    ]
    assert reopen("Discard…", True) == ["Chapter 1"]
    assert safekeeping.emergency_copies(path) == []
    reopen("Not now", True)
    assert len(offers) == 3  # nothing left to offer


def test_a_kept_copy_outlives_later_saves_of_its_document(
    qtbot, window, make_project, failing_saves
):
    """A copy offered back and put off with Not now holds words the editor does not have:
    saving the document again must not delete it (a copy kept since the project opened is
    superseded by the next save, the editor still holding its words)."""
    path = open_doc(window, make_project)
    type_text(window, " Words the disk refused.")
    window.choose = lambda title, text, choices: "Discard changes"
    assert window.projects.close_project()
    failing_saves.heal()
    window.choose = lambda title, text, choices: "Not now"
    assert window.projects.open_project(path)
    type_text(window, " New words.")
    assert window.safekeeping.save_now()
    assert [c.text for c in safekeeping.emergency_copies(path)] == [
        "The sea was grey. Words the disk refused."
    ]
    failing_saves.failing = True
    type_text(window, " Refused again.")
    assert not window.safekeeping.save_now(quiet=True)  # a copy of its own, beside the old one
    old = "The sea was grey. Words the disk refused."
    texts = [c.text for c in safekeeping.emergency_copies(path)]
    assert sorted(texts) == sorted([old, "The sea was grey. New words. Refused again."])
    failing_saves.heal()
    assert window.safekeeping.save_now()  # this run's copy goes once the editor's text is saved
    assert [c.text for c in safekeeping.emergency_copies(path)] == [old]

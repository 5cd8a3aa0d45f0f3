"""The writer's long-form loop in the app: keep writing to the length, stop sequences per
project, a direction and the earlier chapters in the prompt, the context viewer and the
project's memory."""

from __future__ import annotations

from swiftwriter.store import Project

from tests.ui.desk import WAIT, generate, open_doc


def test_long_takes_keep_writing_by_default_and_a_choice_by_hand_sticks(qtbot, window):
    panel = window.panel
    panel.set_target(300, "words")
    assert not panel.keep_writing.isChecked()
    panel.set_target(2000, "words")
    assert panel.keep_writing.isChecked()
    panel.keep_writing.click()  # the writer turns it off
    panel.set_target(5000, "words")
    assert not panel.keep_writing.isChecked()


def test_keep_writing_follows_the_length_after_reopening(qtbot, window, make_project):
    """A project whose last take was 300 words long, reopened and set to 500: the saved False
    was read as chosen by hand, so it stayed off, and the next take saved it off at 500 words
    (issue 63). Only a choice made by hand sticks, across reopening too."""
    from swiftwriter.ui.panel_state import apply_state, save_project_state, state_of

    path = make_project()
    panel = window.panel
    panel.set_target(300, "words")
    with Project.open(path) as project:  # what the 300-word take kept
        save_project_state(project, state_of(panel))
    assert window.projects.open_project(path) and not panel.keep_writing.isChecked()
    panel.set_target(500, "words")
    assert panel.keep_writing.isChecked()
    save_project_state(window.project, state_of(panel))  # the next take keeps it
    window.projects.close_project()
    panel.set_target(40, "tokens")
    assert window.projects.open_project(path) and panel.keep_writing.isChecked()
    panel.keep_writing.click()  # the writer turns it off: that sticks, reopened and longer
    save_project_state(window.project, state_of(panel))
    window.projects.close_project()
    assert window.projects.open_project(path) and not panel.keep_writing.isChecked()
    panel.set_target(2000, "words")
    assert not panel.keep_writing.isChecked()
    apply_state(panel, {"length": 500, "unit": "words", "keep_writing": False})  # kept before
    assert panel.keep_writing.isChecked()  # the flag: the length decides


def test_keep_writing_reaches_the_length_when_the_model_would_end_early(
    qtbot, window, make_project
):
    open_doc(window, make_project)
    model = window.loaded_model.model
    window.panel.set_target(40, "tokens")
    window.takes.measure_baseline = False
    result = generate(qtbot, window)
    eos = window.loaded_model.tokenizer.encode(result["text"])[2]  # the take's third word
    model.generation_config.eos_token_id = eos
    model.config.eos_token_id = eos
    try:
        window.actions_by_name["undo"].trigger()
        window.panel.keep_writing.setChecked(False)
        early = generate(qtbot, window)
        assert early["stats"]["stop_reason"] == "eos" and early["stats"]["tokens"] <= 3
        window.actions_by_name["undo"].trigger()
        window.panel.keep_writing.setChecked(True)
        full = generate(qtbot, window)
        assert full["stats"]["tokens"] >= 40
        # the length reached, at a sentence end or not: no stop sequence was set
        assert full["stats"]["stop_reason"] == "length"
    finally:
        model.generation_config.eos_token_id = None
        model.config.eos_token_id = None


def test_a_project_stop_sequence_ends_the_take_in_the_app(qtbot, window, make_project):
    path = open_doc(window, make_project)
    window.takes.measure_baseline = False
    window.panel.set_target(60, "tokens")
    free = generate(qtbot, window)
    word = free["text"].split()[10]
    window.actions_by_name["undo"].trigger()
    window.panel.set_stop_sequences([word])
    cut = generate(qtbot, window)
    assert cut["stats"]["stop_reason"] == "stop_string"
    assert cut["text"].rstrip().endswith(word) and len(cut["text"]) < len(free["text"])
    with Project.open(path, readonly=True) as p:
        assert p.stop_sequences == [word]  # kept with the project


def test_the_direction_and_earlier_chapters_reach_the_prompt_and_the_viewer(
    qtbot, window, make_project
):
    docs = (("Chapter 1", "Elena climbed the old tower."), ("Chapter 2", "The storm came."))
    open_doc(window, make_project, docs=docs)
    second = window.project.documents()[1].id
    window.show_document(second)
    window.panel.direction.setText("The lamp goes out.")
    window.panel.story_mode.setCurrentText("As many as fit")
    dialog = window.show_context()
    qtbot.addWidget(dialog)
    text = dialog.view.toPlainText()
    assert "=== earlier documents" in text and "climbed" in text
    assert "direction (an author's note" in text
    window.panel.story_mode.setCurrentText("None")
    text = window.show_context().view.toPlainText()
    assert "earlier documents" not in text


def test_project_memory_is_kept_and_heads_the_prompt(qtbot, window, make_project):
    path = open_doc(window, make_project)
    dialog = window.edit_memory()
    dialog.text.setPlainText("A harbour town; Elena keeps the light.")
    dialog.save()
    with Project.open(path, readonly=True) as p:
        assert p.memory == "A harbour town; Elena keeps the light."
    text = window.show_context().view.toPlainText()
    assert text.index("memory and pinned notes") < text.index("harbour")


def test_a_synopsis_by_hand_or_by_the_model_never_touches_the_text(qtbot, window, make_project):
    path = open_doc(window, make_project, docs=(("Chapter 1", "The sea was grey and old."),))
    doc_id = window.doc_id
    dialog = window.edit_synopsis(doc_id)
    qtbot.addWidget(dialog)
    dialog.text.setPlainText("The keeper waits.")
    dialog.save()
    with Project.open(path, readonly=True) as p:
        assert p.document(doc_id).synopsis == "The keeper waits."
    dialog = window.edit_synopsis(doc_id)
    qtbot.addWidget(dialog)
    assert dialog.text.toPlainText() == "The keeper waits."
    dialog.summarise()
    qtbot.waitUntil(lambda: dialog.thread is None, timeout=WAIT)
    written = dialog.text.toPlainText()
    assert written and written != "The keeper waits." and "Summary written" in dialog.status.text()
    dialog.save()
    with Project.open(path, readonly=True) as p:
        assert p.document(doc_id).synopsis == written
        assert p.document(doc_id).text == "The sea was grey and old."


def test_history_shows_the_context_a_take_was_given(qtbot, window, make_project):
    open_doc(window, make_project)
    window.takes.measure_baseline = False
    window.panel.set_target(20, "tokens")
    window.panel.direction.setText("A gull lands.")
    generate(qtbot, window)
    dialog = window.tools.open_history()
    qtbot.addWidget(dialog)
    dialog.select_rows([0])
    assert dialog.context_button.isEnabled()
    text = dialog.show_context()
    assert "this document before the cursor" in text and "A gull lands." in text
    assert dialog.left.toPlainText() == text

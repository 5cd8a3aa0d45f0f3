"""The context viewer shows exactly what the next take receives: both come from the one request
the window makes (ui/takes.take_request), so a length in words becomes the same number of tokens
and the story is cut at the same place, token for token."""

from __future__ import annotations

import random

from swiftwriter.engine.decoding.generator import Generator

from tests.ui.conftest import WORDS, tiny_loaded

WAIT = 30000


def test_the_viewer_shows_the_prompt_of_the_take_that_follows(
    qtbot, window, make_project, monkeypatch
):
    # a small context, so that the story is cut to leave room for the take; the cut depends
    # on the take's length in tokens, which a length in words makes with this tokenizer
    window.models.set_model(tiny_loaded(max_positions=256))
    rng = random.Random(4)
    text = " ".join(rng.choice(WORDS) for _ in range(400)) + "."
    assert window.projects.open_project(make_project(docs=(("Chapter 1", text),)))
    cursor = window.editor.textCursor()
    cursor.movePosition(cursor.MoveOperation.End)
    window.editor.setTextCursor(cursor)
    window.panel.set_target(60, "words")
    window.panel.keep_writing.setChecked(True)
    window.takes.measure_baseline = False

    from swiftwriter.ui.context_dialog import next_take

    shown = next_take(window).session
    shown_ids = shown.build_prompt()
    dialog = window.show_context()
    assert dialog is not None and dialog.view.toPlainText() == shown.story_context().render()
    dialog.close()
    assert len(shown_ids) < len(text.split())  # the story was cut to fit

    calls = []
    real = Generator.generate

    def spy(self, prompt_ids, max_new_tokens, **kwargs):
        calls.append((list(prompt_ids), max_new_tokens, kwargs))
        yield from real(self, prompt_ids, max_new_tokens, **kwargs)

    monkeypatch.setattr(Generator, "generate", spy)
    with qtbot.waitSignal(window.takes.finished, timeout=WAIT) as done:
        window.actions_by_name["generate"].trigger()
    qtbot.waitUntil(lambda: not window.takes.busy, timeout=WAIT)
    ((prompt, limit, kwargs),) = calls
    assert prompt == shown_ids  # token for token
    assert shown.ending.target == 60 and shown.ending.words == 60  # 60 words: 60 tokens here
    # keep writing a length in words: end-of-text forbidden up to the take's bound
    assert kwargs["min_new_tokens"] == shown.ending.limit == 90
    assert limit == shown.ending.limit
    generation = window.project.generation(done.args[0]["generation_id"])
    assert generation.settings["context_given"] == dialog.view.toPlainText()


def test_the_viewer_shows_the_rolling_summary_and_saves_an_edit(qtbot, window, make_project):
    assert window.projects.open_project(make_project())
    doc_id = window.doc_id
    window.project.set_summary(doc_id, "Mara left the harbour.", source="model")
    dialog = window.show_context()
    shown = dialog.view.toPlainText()
    assert "=== rolling summary of this document" in shown and "Mara left the harbour." in shown
    assert dialog.summary.toPlainText() == "Mara left the harbour." and dialog.rolling.isChecked()
    dialog.summary.setPlainText("Mara sailed north with the keeper's lamp.")
    dialog.save_summary_button.click()
    saved = window.project.summary(doc_id)
    assert saved.text == "Mara sailed north with the keeper's lamp." and saved.source == "writer"
    assert "Mara sailed north" in dialog.view.toPlainText()  # the context shown anew
    dialog.rolling.setChecked(False)
    dialog.save_summary_button.click()
    assert not window.project.rolling_summary and window.project.summary(doc_id).source == "writer"
    assert "rolling summary of this document" not in dialog.view.toPlainText()  # off: not read
    dialog.close()

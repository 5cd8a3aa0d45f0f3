"""The first thing a writer meets is the tiny model: the welcome screen and the Models dialog
say what it is for, which size of model writes fiction on this machine, and how to add one with
the memory it takes (the texts: modelstore/guidance.py, tested there)."""

from __future__ import annotations

from swiftwriter.modelstore import guidance


def test_the_welcome_screen_says_what_the_built_in_model_is_for(window):
    label = window.welcome.guidance
    assert window.stack.currentWidget() is window.welcome and label.isVisible()
    assert label.text() == guidance.for_this_machine().welcome_text()
    assert label.text().startswith("The built-in model (SmolLM2-135M-Instruct) is for trying")
    assert "To add one: Tools › Models…" in label.text()


def test_the_models_dialog_says_what_to_add_and_the_memory_it_takes(qtbot, window, monkeypatch):
    monkeypatch.setattr(guidance, "total_memory", lambda: 32 * guidance.GIB)
    dialog = window.models.open_models()
    qtbot.addWidget(dialog)
    advice = guidance.for_this_machine(window.loaded_model.entry.id)
    assert dialog.guidance.isVisible() and dialog.adding.isVisible()
    assert dialog.guidance.text() == advice.choosing_text()
    assert "This computer (32 GB of memory) can run a 7-8B model" in dialog.guidance.text()
    assert dialog.adding.text() == advice.adding_text()
    assert "A 7-8B model is added as a Hugging Face folder (16 GB of bfloat16" in (
        dialog.adding.text()
    )

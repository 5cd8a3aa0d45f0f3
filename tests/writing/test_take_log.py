"""A take writes what a bug report needs to the log: its settings before it runs (model,
precision, length asked and in tokens, sampling, drafting, context) and its outcome after
(status, tokens, why it stopped, the stored generation); a take outside a project too."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from swiftwriter.engine import SamplingSettings
from swiftwriter.store import Project
from swiftwriter.writing.take import Take, TakeRequest

from tests.writing.test_session import Latin1Tokenizer


def loaded_model(model):
    entry = SimpleNamespace(id="tiny-latin1")
    return SimpleNamespace(model=model, tokenizer=Latin1Tokenizer(), entry=entry,
                           precision=lambda: "float32 (by hand)")  # fmt: skip


def take_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "swiftwriter.writing.take"]


def test_a_take_logs_its_settings_and_outcome(tmp_path, tiny_llama, caplog):
    caplog.set_level(logging.DEBUG, logger="swiftwriter.writing.take")
    with Project.create(tmp_path / "Log.swiftwriter", title="Log") as project:
        doc = project.add_document("One", "The harbour wall was old and the tide was low. " * 3)
        request = TakeRequest(project, doc.id, loaded_model(tiny_llama), prompt_text=None,
                              target=12, sampling=SamplingSettings(greedy=True, seed=7),
                              history=None, measure_baseline=False, keep_writing=True)  # fmt: skip
        outcome = Take(request).run()
    settings, done = take_lines(caplog)
    assert settings.startswith(f"take on document {doc.id} with tiny-latin1 (float32 (by hand))")
    assert "12 tokens asked (12 tokens, keep writing True)" in settings
    assert "greedy=True" in settings and "seed=7" in settings and "policy='stop'" in settings
    tokens = outcome.stats["tokens"]
    assert done.startswith(f"take finished: {tokens} tokens of 12 after ")
    assert f"({outcome.stats['stop_reason']})" in done
    assert done.endswith(f"generation {outcome.result.generation.id}")


def test_a_take_outside_a_project_logs_too(tiny_llama, caplog):
    caplog.set_level(logging.DEBUG, logger="swiftwriter.writing.take")
    request = TakeRequest(None, None, loaded_model(tiny_llama), prompt_text="Once upon a time",
                          target=5, unit="words", history=None, measure_baseline=False)  # fmt: skip
    outcome = Take(request).run()
    settings, done = take_lines(caplog)
    assert settings.startswith("take on a prompt with tiny-latin1")
    assert "(5 words, keep writing False)" in settings
    assert done.startswith(f"take finished: {outcome.stats['tokens']} tokens of {outcome.target}")
    assert "generation" not in done.split(")")[-1]

"""A take's request is resolved into one typed, frozen SessionPlan before its session starts
(issue 61): the ending in tokens (a length in words measured, the project's stops added), the
history a ProjectHistory or None, never a flag; the session is built from the plan in one call."""

from __future__ import annotations

import dataclasses

import pytest
from swiftwriter.engine import SamplingSettings
from swiftwriter.store import Project
from swiftwriter.writing.history import ProjectHistory
from swiftwriter.writing.plan import SessionPlan
from swiftwriter.writing.session import DocumentSession, PromptSession, session_for
from swiftwriter.writing.take import Take, TakeRequest, resolve

from tests.writing.test_session import Latin1Tokenizer
from tests.writing.test_take_log import loaded_model


def test_a_request_in_a_project_resolves_into_its_sessions_plan(tmp_path, tiny_llama):
    with Project.create(tmp_path / "Plan.swiftwriter", title="Plan") as project:
        doc = project.add_document("One", "The tide was low and the harbour wall was old. " * 4)
        project.set_stop_sequences(["THE END"])
        loaded = loaded_model(tiny_llama)
        history = ProjectHistory.of(project, loaded.tokenizer)
        request = TakeRequest(project, doc.id, loaded, prompt_text=None, target=20, unit="words",
                              sampling=SamplingSettings(seed=3), history=history,
                              direction="A gull lands.", story_mode="previous",
                              flush_interval=0.5, keep_writing=True)  # fmt: skip
        plan = resolve(request)
        assert isinstance(plan, SessionPlan)
        with pytest.raises(dataclasses.FrozenInstanceError):
            plan.history = None  # type: ignore[misc]
        # 20 words in tokens, measured on the document's text (1 byte a token here: ~5 a word)
        assert plan.ending.words == 20 and plan.ending.target > 40
        assert plan.ending.stops == ("THE END",) and plan.ending.min_new_tokens == plan.ending.limit
        assert plan.history is history and plan.sampling.seed == 3 and plan.prompt_ids is None
        assert (plan.direction, plan.story_mode, plan.flush_interval) == (
            "A gull lands.", "previous", 0.5,
        )  # fmt: skip
        session = session_for(plan)
        assert type(session) is DocumentSession and session.history is history
        assert session.ending == plan.ending  # the stops were in the plan: not added twice
        assert session.direction == "A gull lands." and session.flush_interval == 0.5
        take = Take(request)
        assert take.plan == plan and take.session.ending == plan.ending
        model, prompt = take.session.baseline_inputs()
        assert model is tiny_llama and prompt == take.session.build_prompt()


def test_a_request_outside_a_project_plans_a_prompt_session(tiny_llama):
    request = TakeRequest(None, None, loaded_model(tiny_llama), prompt_text=None, target=7,
                          prompt_ids=[5, 9, 12], history=None)  # fmt: skip
    plan = resolve(request)
    assert plan.project is None and plan.history is None and plan.prompt_ids == (5, 9, 12)
    assert plan.ending.target == 7 and plan.ending.words == 0
    session = session_for(plan)
    assert type(session) is PromptSession and session.build_prompt() == [5, 9, 12]


def test_a_document_session_takes_a_history_or_none_never_a_flag(tmp_path, tiny_llama):
    with Project.create(tmp_path / "Flag.swiftwriter", title="Flag") as project:
        doc = project.add_document("One", "text")
        tok = Latin1Tokenizer()
        assert DocumentSession(project, doc.id, model=tiny_llama, tokenizer=tok).history is None
        for flag in (True, False):
            with pytest.raises(TypeError, match="ProjectHistory or None"):
                DocumentSession(project, doc.id, model=tiny_llama, tokenizer=tok, history=flag)

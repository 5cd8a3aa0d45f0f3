"""The draft-pass experiment (bench/draftpass.py) lives whole in the bench: it changes stages
that every run has and extends the drafter by subclassing, so the engine keeps no hook that
only the experiment calls (tests/training/test_drafters.py runs it and checks its text)."""

from __future__ import annotations

from swiftwriter.bench.draftpass import DraftPassGenerator, DraftPassRun, PassDrafterSource
from swiftwriter.engine.decoding.drafter_source import DrafterSource
from swiftwriter.engine.decoding.generator import Generator
from swiftwriter.engine.decoding.run import Run
from swiftwriter.engine.decoding.sources import CandidateSource


def own_methods(cls) -> set[str]:
    return {name for name, value in vars(cls).items() if callable(value) and name[0] != "_"}


def test_the_draft_pass_run_only_overrides_stages_every_run_has():
    assert own_methods(DraftPassRun) and own_methods(DraftPassRun) <= own_methods(Run)
    assert DraftPassGenerator.run_type is DraftPassRun and Generator.run_type is Run


def test_the_engine_keeps_no_draft_pass_hook():
    """What only the draft pass feeds its drafter is the bench's subclass's, not the contract's
    nor the engine drafter's."""
    extra = own_methods(PassDrafterSource) - own_methods(DrafterSource)
    assert extra == {"set_pass_feature"}
    for cls in (CandidateSource, DrafterSource):
        assert not hasattr(cls, "set_pass_feature"), cls
    assert not hasattr(Run, "draft_ahead")

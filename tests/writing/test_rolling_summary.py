"""The rolling summary (issue 62): what slides out of a long take's small window is summarised
by the model after the take, stored for the document in the project, and read by the next
take's pinned head; the take itself stays exact (speculation writes plain decoding's text); off,
nothing is written; a failure to summarise keeps the take and the old summary."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from swiftwriter.engine import DraftSettings, SamplingSettings
from swiftwriter.engine.decoding.settings import ContextSettings
from swiftwriter.store import Project
from swiftwriter.writing.take import Take, TakeRequest

from tests.writing.test_context import novel  # noqa: F401 - a fixture
from tests.writing.test_session import Latin1Tokenizer, random_text

GREEDY = SamplingSettings(greedy=True, penalty=1.0)
WINDOW = ContextSettings(policy="slide", sink=4, limit=128)  # a small window: `--context-limit 128`


@pytest.fixture
def model(tiny_llama):
    return tiny_llama  # a 1,024-token context: only the limit makes it slide


def _loaded(model):
    return SimpleNamespace(model=model, tokenizer=Latin1Tokenizer(),
                           entry=SimpleNamespace(id="tiny"), precision=lambda: "float32")  # fmt: skip


def _take(project, doc_id, model, drafting=None, target=160) -> Take:
    request = TakeRequest(project, doc_id, _loaded(model), prompt_text=None, target=target,
                          sampling=GREEDY, drafting=drafting or DraftSettings(), context=WINDOW,
                          history=None, measure_baseline=False)  # fmt: skip
    return Take(request)


def _project(tmp_path, name="Novel"):
    project = Project.create(tmp_path / f"{name}.swiftwriter", title=name)
    doc = project.add_document("Chapter 2", random_text(11, 40))
    return project, doc


def test_a_long_take_writes_the_summary_and_the_next_take_reads_it(tmp_path, model, one_thread):
    project, doc = _project(tmp_path)
    with project:
        assert project.rolling_summary and project.summary(doc.id).text == ""
        first = _take(project, doc.id, model).run()
        slid = first.result.slid_out_ids
        committed = list(random_text(11, 40).encode("latin-1")) + first.result.token_ids
        # what slid out: the text after the 4 sink tokens, up to the window's text
        assert first.stats["slides"] >= 1 and len(slid) > 40
        assert slid == committed[4 : 4 + len(slid)] and len(committed) - 4 - len(slid) <= 128
        summary = project.summary(doc.id)
        assert summary.text and summary.source == "model"
        assert first.summary_line.startswith("Rolling summary updated from")
        following = _take(project, doc.id, model, target=16)
        built = following.session.story_context()
        part = next(p for p in built.parts if p.name == "summary")
        assert summary.text in part.text and not part.shortened
        assert "rolling summary of this document" in built.render()
        pinned, _ = following.session.prompt_parts()
        assert pinned[-len(part.ids) :] == part.ids  # kept by every slide of the next take
        assert summary.text in following.session.prompt_as_text()


def test_speculation_writes_plain_decoding_s_take_and_summary(tmp_path, model, one_thread):
    runs = {}
    for name, drafting in (("ar", DraftSettings.plain()), ("tokenswift", DraftSettings())):
        project, doc = _project(tmp_path, name)
        with project:
            first = _take(project, doc.id, model, drafting).run()
            second = _take(project, doc.id, model, drafting).run()  # with the summary pinned
            runs[name] = (first.result.token_ids, second.result.token_ids,
                          project.summary(doc.id).text, first.stats["slides"])  # fmt: skip
    assert runs["ar"][3] >= 1 and len(runs["ar"][0]) >= 160
    assert runs["tokenswift"] == runs["ar"]


def test_switched_off_no_summary_is_written_nor_read(tmp_path, model, one_thread):
    project, doc = _project(tmp_path)
    with project:
        project.set_summary(doc.id, "Mara left.")
        project.set_rolling_summary(False)
        take = _take(project, doc.id, model)
        assert "Mara" not in take.session.prompt_as_text()
        result = take.run()
        assert result.result.slid_out_ids and result.summary_line == ""
        assert project.summary(doc.id).text == "Mara left."  # as the writer left it
        project.set_rolling_summary(True)
        assert "Mara left." in _take(project, doc.id, model, target=16).session.prompt_as_text()


def test_a_failure_to_summarise_keeps_the_take_and_the_summary(
    tmp_path, model, one_thread, monkeypatch, caplog
):
    from swiftwriter.writing import rolling

    def broken(*args, **kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(rolling, "roll", broken)
    project, doc = _project(tmp_path)
    with project:
        project.set_summary(doc.id, "Mara left.")
        result = _take(project, doc.id, model).run()
        assert result.summary_line == (
            "Rolling summary not updated (it is as it was): out of memory"
        )
        assert project.summary(doc.id).text == "Mara left."
        assert len(project.document(doc.id).text) == 40 + len(result.result.token_ids)


@pytest.fixture
def cli_novel(novel, monkeypatch, model):  # noqa: F811 - the fixture imported above
    """The CLI's model loader returns the tiny model (its one-time set-up shared with the
    other tests here) with the Latin-1 tokenizer."""
    from swiftwriter.modelstore import loader, registry
    from swiftwriter.modelstore.loader import LoadedModel
    from swiftwriter.modelstore.registry import ModelEntry

    entry = ModelEntry(id="tiny", name="tiny", source="folder", path=novel[0].parent)
    loaded = LoadedModel(entry=entry, model=model, tokenizer=Latin1Tokenizer(), device="cpu",
                         dtype="float32")  # fmt: skip
    monkeypatch.setattr(registry, "resolve", lambda name: entry)
    monkeypatch.setattr(loader, "load", lambda *a, **k: loaded)
    return novel


def test_the_cli_writes_shows_edits_and_switches_off_the_summary(cli_novel, capsys, one_thread):
    from swiftwriter.cli import main

    path, _, three = cli_novel
    take = ["generate", str(path), "Chapter 3", "--no-history", "--exact-length", "--preset",
            "precise", "--max-new-tokens", "100", "--min-new-tokens", "100", "--context-limit", "128"]  # fmt: skip
    assert main(take) == 0
    err = capsys.readouterr().err
    assert "Rolling summary updated from" in err and "rolling summary of 'Chapter 3': " in err
    with Project.open(path, readonly=True) as project:
        written = project.summary(three)
    assert written.source == "model" and written.text in err
    assert main(["project", "summary", str(path), "Chapter 3"]) == 0
    assert "(last written by the model; rolling summaries are on)" in capsys.readouterr().out
    assert main(["project", "summary", str(path), "Chapter 3", "--set", "Mara left."]) == 0
    assert capsys.readouterr().out.startswith("Mara left.\n(last written by the writer")
    assert main(["project", "summary", str(path), "--rolling", "off"]) == 0
    assert "Rolling summaries are off" in capsys.readouterr().out
    assert main(take) == 0
    assert "olling summary" not in capsys.readouterr().err
    with Project.open(path, readonly=True) as project:
        assert project.summary(three).text == "Mara left."

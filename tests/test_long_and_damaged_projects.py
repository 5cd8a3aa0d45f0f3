"""A take on a project with very long texts reads and tokenizes only what its window can use
(a long prompt is refused from its end alone); a damaged drafting cache is rebuilt and takes
whose ids lie beyond the vocabulary are left out of the history, each said in one line."""

from __future__ import annotations

import json
import logging

import pytest
from swiftwriter.engine import SamplingSettings
from swiftwriter.engine.decoding.history_source import HistoryIndex
from swiftwriter.engine.decoding.settings import ContextSettings
from swiftwriter.store import Project
from swiftwriter.store import history as history_mod
from swiftwriter.writing.endings import TakeEnding
from swiftwriter.writing.history import ProjectHistory
from swiftwriter.writing.session import DocumentSession, PromptSession, PromptTooLong

from tests.conftest import build_tiny
from tests.writing.test_session import Latin1Tokenizer

GREEDY = SamplingSettings(greedy=True, penalty=1.0)
MEGABYTES = "".join(f"{i:07d} " for i in range(1 << 20))  # 8 MB, no two windows alike


@pytest.fixture
def project(tmp_path):
    proj = Project.create(tmp_path / "Novel.swiftwriter", title="Novel")
    yield proj
    proj.close()


@pytest.fixture(scope="module")
def small_window():
    return build_tiny("llama", seed=5, max_positions=256)


def test_long_texts_are_read_only_as_far_as_the_window(
    project, small_window, monkeypatch, one_thread
):
    monkeypatch.setattr(history_mod, "HISTORY_TEXT_BYTES", 1 << 16)  # the history's share
    project.set_memory(MEGABYTES)
    project.add_note("Bible", MEGABYTES, pinned=True)
    project.add_document("Earlier", MEGABYTES)
    doc = project.add_document("Target", MEGABYTES)
    tok = Latin1Tokenizer()
    session = DocumentSession(project, doc.id, model=small_window, tokenizer=tok,
                              sampling=GREEDY, ending=TakeEnding.exact(16), story_mode="fit",
                              flush_interval=0, history=ProjectHistory.of(project, tok))  # fmt: skip
    built = session.story_context()
    memory, earlier, text = built.parts
    assert bytes(memory.ids).decode("latin-1") == MEGABYTES[: len(memory.ids)]
    assert bytes(text.ids).decode("latin-1") == MEGABYTES[-len(text.ids) :]
    assert len(built.ids) == 256 - 16 - 1 and "of about 8,388,608 tokens" in text.shortened
    result = session.run()
    assert result.status == "finished" and result.document.text.endswith(result.text)
    # the history read each text's end: a few hundred kilobytes tokenized in all, not 32 MB
    assert sum(len(t) for t in tok.encoded) < 400_000


def test_a_prompt_longer_than_the_context_is_refused_from_its_end(small_window):
    tok = Latin1Tokenizer()
    long = PromptSession(model=small_window, tokenizer=tok, prompt_text=MEGABYTES)
    with pytest.raises(PromptTooLong, match="about 8,388,608 tokens but the model's context "
                                            "holds 256"):  # fmt: skip
        long.build_prompt()
    assert sum(len(t) for t in tok.encoded) < 10_000
    slide = PromptSession(model=small_window, tokenizer=tok, prompt_text=MEGABYTES,
                          context=ContextSettings(policy="slide"))  # fmt: skip
    assert bytes(slide.build_prompt()).decode("latin-1") == MEGABYTES[-256:]
    fits = PromptSession(model=small_window, tokenizer=tok, prompt_text="Once upon a time")
    assert fits.build_prompt() == list(b"Once upon a time")


def history_of(project) -> ProjectHistory:
    tok = Latin1Tokenizer()
    return ProjectHistory.of(project, tok)


@pytest.mark.parametrize("damage", [{"depth": 2147483648}, {"alive_tokens": "NaN"}])
def test_a_damaged_drafting_cache_is_rebuilt_in_one_line(project, caplog, damage):
    project.add_document("Chapter", "The sea wall rose and fell.")
    history_of(project).refresh(256)
    parts = project.load_ngram_cache("latin1-test")
    meta = {**json.loads(parts["meta"]), **damage}
    project.save_ngram_cache("latin1-test", {"meta": json.dumps(meta).encode()})
    with caplog.at_level(logging.WARNING):
        index = history_of(project).refresh(256)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("Novel.swiftwriter: the drafting cache does not hold together (")
    assert line.endswith("): rebuilt") and str(next(iter(damage.values()))) in line
    assert len(index) == len("The sea wall rose and fell.")
    stored = HistoryIndex.from_parts(project.load_ngram_cache("latin1-test"), vocab_size=256)
    assert stored is not None and stored.fingerprints() == index.fingerprints()


def test_takes_beyond_the_vocabulary_are_left_out_once(project, caplog):
    doc = project.add_document("Chapter", "The sea wall rose and fell.")
    for bad in (60000, 4_000_000_000):
        record = project.start_generation(doc.id, "h", "m", "latin1-test")
        record.append(" x", [65, 66, bad])
        record.finish("finished")
    with caplog.at_level(logging.WARNING):
        index = history_of(project).refresh(256)
        again = history_of(project).refresh(256)  # from the stored cache: nothing to say
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == ("Novel.swiftwriter: 2 recorded texts hold token ids beyond the model's "
                    "vocabulary (up to 4,000,000,000, of 256): left out of the drafting history")  # fmt: skip
    assert index.tokens_of("g1") == index.tokens_of("g2") == [] and "g2" in again.sources
    assert len(again) == len("The sea wall rose and fell.")

"""A damaged drafting cache is rebuilt and takes whose ids lie beyond the vocabulary are left
out of the history, each said in one line."""

from __future__ import annotations

import json
import logging

import pytest
from swiftwriter.engine.decoding.history_source import HistoryIndex
from swiftwriter.session import DocumentSession, ProjectHistory
from swiftwriter.store import Project

from tests.test_session import Latin1Tokenizer


@pytest.fixture
def project(tmp_path):
    proj = Project.create(tmp_path / "Novel.swiftwriter", title="Novel")
    yield proj
    proj.close()


def history_of(project) -> ProjectHistory:
    tok = Latin1Tokenizer()
    return ProjectHistory(project, tok.identity, DocumentSession.encoder_for(tok))


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

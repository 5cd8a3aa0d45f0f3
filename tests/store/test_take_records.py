"""Generation records: streamed in chunks, closed atomically with the document, recovered after
a crash; and the inputs history seeding reads from the store."""

from __future__ import annotations

import pytest
from swiftwriter.store import Project, ProjectError
from swiftwriter.store import take_records as generations_module


def test_streaming_is_visible_to_readers_and_finish_appends_atomically(project, project_path):
    doc = project.add_document("Chapter", "Once")
    rec = project.start_generation(doc.id, "p1", "model-a", "tok-a", {"penalty": 1.2}, 0)
    assert rec.append(" upon", [10, 11])  # interval 0: every append flushes
    assert rec.append(" a time", [12, 13, 14])
    with Project.open(project_path, readonly=True) as view:
        (live,) = view.generations(doc.id)
        assert (live.status, live.text, live.n_tokens) == ("streaming", " upon a time", 5)
        assert view.document(doc.id).text == "Once"  # the document changes only at the end
    gen = rec.finish("finished", {"tau": 2.5, "tokens": 5}, append_to_document=True)
    assert gen.status == "finished" and gen.applied and gen.stats["tau"] == 2.5
    assert gen.settings == {"penalty": 1.2} and gen.token_ids == [10, 11, 12, 13, 14]
    assert project.document(doc.id).text == "Once upon a time"
    assert project.snapshots(doc.id)[0].text == "Once"  # taken before the generation
    assert project.db.execute("SELECT COUNT(*) FROM generation_chunks").fetchone()[0] == 0
    with pytest.raises(ProjectError, match="already finished"):
        rec.append("more", [1])


def test_flushes_about_once_per_interval(project, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(generations_module.time, "monotonic", lambda: clock[0])
    doc = project.add_document("Chapter")
    rec = project.start_generation(doc.id, "p", "m", "t", {})  # default: once a second
    flushes = []
    for i in range(30):
        clock[0] += 0.25
        flushes.append(rec.append(f"{i} ", [i]))
    assert [i for i, f in enumerate(flushes) if f] == [3, 7, 11, 15, 19, 23, 27]
    assert project.generations(doc.id)[0].n_tokens == 28
    assert rec.flushed_tokens == 28
    clock[0] += 0.25  # 0.75 s since the last flush
    assert not rec.append("tail", [99])
    assert project.generations(doc.id)[0].n_tokens == 28  # buffered, not yet written
    gen = rec.finish("cancelled")
    assert gen.n_tokens == 31 and gen.text.endswith("29 tail")


def test_a_failed_generation_keeps_its_text_out_of_the_document(project):
    doc = project.add_document("Chapter", "Kept as is.")
    with pytest.raises(RuntimeError), project.start_generation(doc.id, "p", "m", "t") as rec:
        rec.append(" half", [5])
        raise RuntimeError("out of memory")
    (gen,) = project.generations(doc.id)
    assert gen.status == "failed" and "out of memory" in gen.error and gen.text == " half"
    assert project.document(doc.id).text == "Kept as is."
    rec2 = project.start_generation(doc.id, "p", "m", "t")
    with pytest.raises(ProjectError, match="not 'streaming'"):
        rec2.finish("streaming")
    with pytest.raises(ProjectError, match="0 to 4294967295"):
        rec2.append("x", [-1])
    with pytest.raises(ProjectError, match="needs a model id"):
        project.start_generation(doc.id, "p", "", "t")
    with pytest.raises(ProjectError, match="not plain JSON"):
        project.start_generation(doc.id, "p", "m", "t", {"bad": object()})
    with pytest.raises(ProjectError, match="No document with id 42"):
        project.start_generation(42, "p", "m", "t")


def test_an_unfinished_generation_is_offered_for_recovery_after_reopening(project, project_path):
    doc = project.add_document("Chapter", "Start.")
    rec = project.start_generation(doc.id, "p", "m", "t", {}, flush_interval=60)
    rec.append(" Saved on close.", [1, 2, 3])
    assert project.interrupted_generations() == []  # live in this process
    project.close()  # flushes what is buffered; the row stays 'streaming'
    with Project.open(project_path) as proj:
        (gen,) = proj.interrupted_generations()
        assert gen.text == " Saved on close." and gen.n_tokens == 3
        kept = proj.recover_generation(gen.id, append=False)
        assert kept.status == "failed" and not kept.applied and kept.token_ids == [1, 2, 3]
        assert proj.document(doc.id).text == "Start."
        assert proj.interrupted_generations() == []


def test_finishing_into_a_deleted_document_keeps_the_text_in_the_history(project):
    doc = project.add_document("Chapter", "x")
    rec = project.start_generation(doc.id, "p", "m", "t")
    rec.append(" y", [7])
    project.delete(doc.id)
    gen = rec.finish("finished", append_to_document=True)
    assert gen.status == "finished" and not gen.applied and gen.text == " y"
    assert [g.id for g in project.generations(doc.id)] == [gen.id]


def test_history_inputs_follow_tokenizer_and_changes(project):
    def tokenize(text):
        return [ord(c) for c in text]

    a = project.add_document("A", "ab")
    b = project.add_document("B", "")
    project.add_note("Cast", "Ann")
    for tok, ids in (("tok-1", [1, 2]), ("tok-2", [3]), ("tok-1", [4, 5, 6])):
        rec = project.start_generation(a.id, "p", "m", tok)
        rec.append("z" * len(ids), ids)
        rec.finish("finished")
    streaming = project.start_generation(a.id, "p", "m", "tok-1", flush_interval=0)
    streaming.append("s", [9])
    prints = project.history_fingerprints("tok-1")
    assert sorted(prints) == ["d1", "g1", "g3", "n1"]  # empty B and streaming g4 left out
    assert list(project.history_token_sequences("tok-1")) == [[1, 2], [4, 5, 6]]
    assert list(project.history_token_sequences("tok-1", tokenize)) == [
        [1, 2],
        [4, 5, 6],
        [97, 98],
        [ord(c) for c in "Cast\nAnn"],
    ]
    project.update_text(b.id, "new")
    project.update_text(a.id, "abc")
    again = project.history_fingerprints("tok-1")
    assert again["d1"] != prints["d1"] and again["g1"] == prints["g1"] and "d2" in again
    project.delete(b.id)
    assert "d2" not in project.history_fingerprints("tok-1")
    with pytest.raises(ProjectError, match="needs a tokenizer"):
        project.history_tokens("d1")
    with pytest.raises(ProjectError, match="Unknown history key"):
        project.history_tokens("x1")


def test_ngram_cache_parts_are_stored_per_tokenizer(project, project_path):
    project.save_ngram_cache("tok-1", {"meta": b"{}", "corpus": b"\x01\x02"})
    project.save_ngram_cache("tok-1", {"corpus": b"\x03"})  # only the changed part
    project.save_ngram_cache("tok-2", {"meta": b"[]"})
    assert project.load_ngram_cache("tok-1") == {"meta": b"{}", "corpus": b"\x03"}
    project.save_ngram_cache("tok-1", {"meta": b"new"}, replace=True)
    assert project.load_ngram_cache("tok-1") == {"meta": b"new"}
    project.drop_ngram_cache("tok-2")
    assert project.load_ngram_cache("tok-2") == {}
    project.close()
    with Project.open(project_path, readonly=True) as view:
        assert view.load_ngram_cache("tok-1") == {"meta": b"new"}


def test_recovery_puts_the_take_back_where_it_was_written(project):
    from swiftwriter.store.take_records import recovery_point

    doc = project.add_document("Chapter", "Before the take. After the take.")
    rec = project.start_generation(doc.id, "p", "m", "t", {"written_after": "Before the take."}, 0)
    rec.append(" The take's own words.", [1, 2, 3])
    project._live.clear()  # as if the app had stopped mid-take
    project.update_text(doc.id, "New opening. Before the take. After the take.")  # edited later
    project.recover_generation(rec.id, append=True)
    assert project.document(doc.id).text == (
        "New opening. Before the take. The take's own words. After the take."
    )
    # never twice: text already in place is skipped, all of it or a long enough beginning
    assert recovery_point("A. take text here. B.", " take text here.", "A.") == (18, "")
    partial = "A. take text here and more B."
    assert recovery_point(partial, " take text here and more words.", "A.") == (
        len("A. take text here and more "),
        "words.",
    )
    assert recovery_point("A. B.", " short", "A.") == (2, " short")
    assert recovery_point("No anchor here.", " tail", "missing text") == (15, " tail")
    assert recovery_point("Start.", "Opening ", "") == (0, "Opening ")

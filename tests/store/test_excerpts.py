"""Long stored texts are read only as far as asked (the end or the beginning of a document, a
note, the memory), whole characters only; history reads each text's end; a text column holding
bytes reads as text where they decode, and with U+FFFD, said once, where they do not."""

from __future__ import annotations

import logging
import sqlite3

from swiftwriter.store import history as history_mod
from swiftwriter.store import texts as texts_mod

TALE = "Der Bär träumt von Äpfeln. " * 40_000  # about a megabyte, with two-byte characters


def test_the_end_or_the_start_of_a_long_text_in_whole_characters(project):
    doc = project.add_document("Long", TALE)
    size = len(TALE.encode())
    for limit in range(1000, 1010):  # every cut, on a character's first byte or inside it
        end = project.excerpt("document", doc.id, limit)
        assert TALE.endswith(end.text) and len(end.text.encode()) in (limit, limit - 1)
        assert (end.read, end.size, end.whole) == (limit, size, False)
        start = project.excerpt("document", doc.id, limit, end=False)
        assert TALE.startswith(start.text) and len(start.text.encode()) in (limit, limit - 1)
    assert project.excerpt("document", doc.id, 10 * size).text == TALE
    project.set_memory("Premise. " + TALE)
    assert project.excerpt("memory", limit=9, end=False).text == "Premise. "
    note = project.add_note("Cast", "Ann and Bo")
    assert project.excerpt("note", note.id, 3).text == " Bo"
    synopsis = project.excerpt("synopsis", doc.id, 100)
    assert synopsis.text == "" and synopsis.whole
    assert [d.text for d in project.documents(texts=False)] == [""]
    assert project.document(doc.id, texts=False).title == "Long"


def test_history_reads_the_end_of_each_text(project, monkeypatch):
    monkeypatch.setattr(history_mod, "HISTORY_TEXT_BYTES", 64)
    monkeypatch.setattr(history_mod, "HISTORY_TAKE_TOKENS", 5)
    doc = project.add_document("Long", "x" * 1000 + "the end of the chapter, last words here.")
    rec = project.start_generation(doc.id, "p", "m", "tok")
    rec.append("take", list(range(100, 120)))
    rec.finish("finished")
    assert project.history_tokens("g1") == [115, 116, 117, 118, 119]
    ends = project.history_tokens(f"d{doc.id}", lambda text: [len(text)])
    assert ends == [64]
    before = project.history_fingerprints("tok")[f"d{doc.id}"]
    project.update_text(doc.id, "y" + project.document(doc.id).text[1:])
    assert project.history_fingerprints("tok")[f"d{doc.id}"] == before  # not what drafts
    project.update_text(doc.id, project.document(doc.id).text + "!")
    assert project.history_fingerprints("tok")[f"d{doc.id}"] != before


def test_text_stored_as_bytes_reads_as_text(project, project_path, caplog, monkeypatch):
    monkeypatch.setattr(texts_mod, "_said", set())  # what this process said before
    readable = project.add_document("Readable", "x")
    damaged = project.add_document("Damaged", "x")
    with sqlite3.connect(project_path) as db:
        db.execute("UPDATE documents SET text = ? WHERE id = ?", ["café".encode(), readable.id])
        db.execute("UPDATE documents SET text = ? WHERE id = ?", [b"\xff sea \x80", damaged.id])
    with caplog.at_level(logging.WARNING):
        texts = [d.text for d in project.documents()]
        assert texts == ["café", "\ufffd sea \ufffd"]
        assert project.excerpt("document", damaged.id, 4).text == "ea \ufffd"
        assert project.history_fingerprints("tok")  # digests text, never bytes
    (line,) = [r.getMessage() for r in caplog.records]  # said once, naming the document
    assert line.startswith(f"Novel.swiftwriter: document {damaged.id} 'Damaged' holds bytes")

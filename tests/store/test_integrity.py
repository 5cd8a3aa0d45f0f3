"""The file itself: refused files stay byte-for-byte untouched, older formats migrate (with a
backup), and a generation killed mid-stream leaves a sound file holding every flushed piece."""

from __future__ import annotations

import os
import queue
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import sqlite_utils
from swiftwriter.store import Project, ProjectError, ProjectLockedError, schema
from swiftwriter.store.lock import lock_path_for

from .conftest import FORMAT_1_SQL, file_digest


def make_format_1(path):
    conn = sqlite3.connect(path)
    conn.executescript(FORMAT_1_SQL)
    conn.executescript(
        f"""
        PRAGMA application_id = {schema.APPLICATION_ID};
        PRAGMA user_version = 1;
        INSERT INTO meta VALUES ('title', 'Old novel'), ('author', 'Someone');
        INSERT INTO documents VALUES (1, NULL, 'part', 'Part I', '', 0, 't', 't');
        INSERT INTO documents VALUES (2, 1, 'chapter', 'Chapter 1', 'It began.', 0, 't', 't');
        INSERT INTO snapshots VALUES (1, 2, 'Chapter 1', 'It be', 'manual', 't');
        INSERT INTO notes VALUES (1, 'Cast', 'Ann', 1, 0, 't', 't');
        """
    )
    conn.commit()
    conn.close()


def shape(conn) -> dict:
    out = {}
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table','index')"):
        cols = conn.execute(f'PRAGMA table_info("{name}")').fetchall()
        out[name] = sorted(cols)
    return out


def test_frozen_format_1_is_what_migration_1_makes():
    made = sqlite_utils.Database(sqlite3.connect(":memory:"))
    schema.migrate(made, target=1)
    frozen = sqlite3.connect(":memory:")
    frozen.executescript(FORMAT_1_SQL)
    assert shape(made.conn) == shape(frozen)


def test_a_format_1_file_migrates_with_a_backup(tmp_path):
    path = tmp_path / "Old.swiftwriter"
    make_format_1(path)
    digest = file_digest(path)
    with Project.open(path, readonly=True) as view:  # read through a migrated copy in memory
        assert [d.title for d in view.documents()] == ["Part I", "Chapter 1"]
        assert view.generations() == []
    assert file_digest(path) == digest
    with Project.open(path) as proj:
        assert proj.schema_version() == schema.SCHEMA_VERSION
        assert proj.meta["title"] == "Old novel"
        assert [(d.depth, d.title, d.text) for d in proj.documents()] == [
            (0, "Part I", ""),
            (1, "Chapter 1", "It began."),
        ]
        assert [s.text for s in proj.snapshots(2)] == ["It be"]
        assert [n.title for n in proj.pinned_notes()] == ["Cast"]
        rec = proj.start_generation(2, "h", "m", "tok", {"temperature": 1.0})
        rec.append(" Then more.", [1, 2, 3])
        rec.finish("finished", {"tau": 1.5}, append_to_document=True)
        assert proj.document(2).text == "It began. Then more."
        proj.delete(1)
        assert proj.trash()[0].title == "Part I"
        assert proj.integrity_check() == "ok"
    backup = sqlite3.connect(tmp_path / "Old.swiftwriter.format1.bak")
    assert backup.execute("PRAGMA user_version").fetchone()[0] == 1
    assert backup.execute("SELECT text FROM documents WHERE id = 2").fetchone()[0] == "It began."
    backup.close()
    with Project.open(path) as proj:  # opening again migrates nothing more
        assert proj.schema_version() == schema.SCHEMA_VERSION


def _garbage_pages(path):
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for n in (1, 2, 3):
        data[n * page : n * page + 12] = b"\xff" * 12
    path.write_bytes(bytes(data))


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 + 123])


def _bad_magic(path):
    data = bytearray(path.read_bytes())
    data[0:6] = b"XQLite"
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage, message",
    [
        (_garbage_pages, "damaged"),
        (_truncate, "damaged"),
        (_bad_magic, "not an SQLite database"),
    ],
)
def test_a_damaged_project_is_refused_and_left_untouched(project, project_path, damage, message):
    for i in range(40):
        project.add_document(f"Chapter {i}", "words " * 400)
    project.close()
    damage(project_path)
    digest = file_digest(project_path)
    for readonly in (False, True):
        with pytest.raises(ProjectError, match=message) as info:
            Project.open(project_path, readonly=readonly)
        assert "Traceback" not in str(info.value)
    assert file_digest(project_path) == digest
    assert not lock_path_for(project_path).exists()


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "is empty"),
        (b"Chapter one\nIt was a dark and stormy night.\n", "not an SQLite database"),
        (bytes(range(256)) * 20, "not an SQLite database"),
    ],
)
def test_a_file_that_is_not_a_project_is_refused_and_left_untouched(tmp_path, content, message):
    path = tmp_path / "notes.swiftwriter"
    path.write_bytes(content)
    with pytest.raises(ProjectError, match=message):
        Project.open(path)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.swiftwriter"]


def test_foreign_and_newer_databases_are_refused_untouched(tmp_path):
    foreign = tmp_path / "other.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    newer = tmp_path / "newer.swiftwriter"
    Project.create(newer).close()
    conn = sqlite3.connect(newer)
    conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    for path, message in ((foreign, "not a SwiftWriter project"), (newer, "newer SwiftWriter")):
        digest = file_digest(path)
        with pytest.raises(ProjectError, match=message):
            Project.open(path)
        assert file_digest(path) == digest
    with pytest.raises(ProjectError, match="No such project"):
        Project.open(tmp_path / "missing.swiftwriter")


STREAMER = textwrap.dedent(
    """
    import sys
    from swiftwriter.store import Project

    proj = Project.open(sys.argv[1])
    rec = proj.start_generation(1, "hash", "model", "tok", {"n": 1}, flush_interval=0.02)
    i = 0
    while True:
        if rec.append(f"<{i}>", [i % 1000]):
            print("FLUSHED", len(rec.token_ids), flush=True)
        i += 1
    """
)


def test_generation_killed_mid_stream_keeps_every_flushed_piece(project, project_path):
    doc = project.add_document("Chapter", "Before the generation.")
    project.close()
    child = subprocess.Popen(
        [sys.executable, "-c", STREAMER, str(project_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in child.stdout], daemon=True).start()
    try:
        flushed = []
        deadline = time.monotonic() + 30
        while len(flushed) < 8 and time.monotonic() < deadline:
            try:  # a child that stops flushing fails here in seconds, not at the suite timeout
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no flush within 30 s (got {flushed})")
            assert line.startswith("FLUSHED"), line
            flushed.append(int(line.split()[1]))
            if len(flushed) == 2:  # while it streams: writers refused, readers welcome
                with pytest.raises(ProjectLockedError, match=f"process {child.pid}"):
                    Project.open(project_path)
                with Project.open(project_path, readonly=True) as view:
                    (live,) = view.generations()
                    assert live.status == "streaming" and live.n_tokens >= flushed[0]
                    assert view.interrupted_generations() == []  # its writer is alive
        child.send_signal(signal.SIGKILL)  # while it keeps appending and flushing
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL
    with Project.open(project_path) as proj:  # the dead writer's lock does not block
        assert proj.integrity_check() == "ok"
        (gen,) = proj.interrupted_generations()
        n = gen.n_tokens
        assert n >= flushed[-1]
        full = proj.generation(gen.id)
        assert full.text == "".join(f"<{i}>" for i in range(n))
        assert full.token_ids == [i % 1000 for i in range(n)]
        assert proj.document(doc.id).text == "Before the generation."
        assert proj.snapshots(doc.id)[0].reason == "before generation"
        recovered = proj.recover_generation(gen.id)
        assert recovered.status == "failed" and "interrupted" in recovered.error
        assert proj.document(doc.id).text == "Before the generation." + full.text
        assert proj.interrupted_generations() == []
        with pytest.raises(ProjectError, match="not an interrupted one"):
            proj.recover_generation(gen.id)
    assert os.path.exists(project_path)


PLANTED = """
CREATE TRIGGER wipe AFTER UPDATE ON documents BEGIN DELETE FROM documents; END;
CREATE TRIGGER wipe_new AFTER INSERT ON documents BEGIN DELETE FROM documents; END;
CREATE VIEW peek AS SELECT text FROM documents;
CREATE TABLE stash (x);
CREATE INDEX stash_x ON stash (x);
"""


def _objects(path) -> set:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    found = {(t, n) for t, n in conn.execute("SELECT type, name FROM sqlite_master")}
    conn.close()
    return found


def test_planted_triggers_views_and_tables_never_run_or_reach_backups(
    project, project_path, tmp_path, monkeypatch, caplog
):
    """A project file can carry SQL of its own: a trigger that empties the document tree on
    the writer's next save. What the app does not make is dropped on open, and never copied
    into a backup or a restored project."""
    from swiftwriter.store import backups

    monkeypatch.setenv("SWIFTWRITER_DATA_DIR", str(tmp_path / "data"))
    doc = project.add_document("Chapter 1", "Saved before the trigger was planted.")
    project.close()
    conn = sqlite3.connect(project_path)
    conn.executescript(PLANTED)
    conn.close()
    planted = {("trigger", "wipe"), ("trigger", "wipe_new"), ("view", "peek"),
               ("table", "stash"), ("index", "stash_x")}  # fmt: skip
    with Project.open(project_path, readonly=True) as view:  # a read-only view: no change
        made = view.backup()
    assert planted <= _objects(project_path)
    assert not planted & _objects(made.path)
    restored = backups.restore(made.path, tmp_path / "Restored.swiftwriter")
    assert not planted & _objects(restored)
    conn = sqlite3.connect(made.path)  # a backup planted after it was made: restore drops them
    conn.executescript(PLANTED)
    conn.close()
    (made.path.parent / f"{made.path.name}{backups.CHECKSUM}").unlink()
    again = backups.restore(made.path, tmp_path / "Again.swiftwriter")
    assert not planted & _objects(again)
    with Project.open(project_path) as proj:
        proj.update_text(doc.id, "Saved after.")
        proj.add_document("Chapter 2", "More.")
        assert [d.text for d in proj.documents()] == ["Saved after.", "More."]
    assert not planted & _objects(project_path)
    assert sum("does not make" in r.getMessage() for r in caplog.records) == 1


def test_an_unreadable_pre_migration_backup_is_redone(tmp_path):
    """A run killed while copying the old format left a `.bak` that cannot be read: the next
    open makes it again before migrating, instead of trusting the name."""
    path = tmp_path / "Old.swiftwriter"
    make_format_1(path)
    bak = tmp_path / "Old.swiftwriter.format1.bak"
    bak.write_bytes(path.read_bytes()[:5000])  # what a copy killed midway leaves
    with Project.open(path) as proj:
        assert proj.schema_version() == schema.SCHEMA_VERSION
    backup = sqlite3.connect(f"file:{bak}?mode=ro", uri=True)
    assert backup.execute("PRAGMA user_version").fetchone()[0] == 1
    assert backup.execute("SELECT text FROM documents WHERE id = 2").fetchone()[0] == "It began."
    assert backup.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    backup.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_pre_migration_copy_that_does_not_check_out_stops_the_migration(tmp_path, monkeypatch):
    from swiftwriter.store import backups

    path = tmp_path / "Old.swiftwriter"
    make_format_1(path)
    digest = file_digest(path)
    monkeypatch.setattr(backups, "sound_copy", lambda copy, version: False)
    with pytest.raises(ProjectError, match="before upgrading"):
        Project.open(path)
    assert file_digest(path) == digest
    assert not (tmp_path / "Old.swiftwriter.format1.bak").exists()

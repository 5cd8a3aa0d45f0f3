"""The project file where the file system is not friendly: read-only files and folders, a
second process copying the file mid-session, planted links, refused files, a full disk
during locking."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest
from swiftwriter.store import Project, ProjectError
from swiftwriter.store import lock as lock_mod

from tests.conftest import run_as_user
from tests.store.conftest import file_digest

OPEN_AND_REPORT = textwrap.dedent(
    """
    import sys
    from swiftwriter.store import Project, ProjectError
    path = sys.argv[1]
    try:
        Project.open(path).close()
        print("writable")
    except ProjectError as exc:
        print("refused:", exc)
    with Project.open(path, fallback_readonly=True) as p:
        print("fallback:", p.readonly, p.readonly_reason)
        print("docs:", [d.title for d in p.documents()])
    """
)


@pytest.fixture
def saved(project_path):
    with Project.create(project_path, title="Novel") as proj:
        proj.add_document("Chapter 1", "It was a bright cold day.")
    return project_path


def test_a_read_only_file_opens_read_only_and_says_why(saved):
    saved.chmod(0o444)
    result = run_as_user(OPEN_AND_REPORT, str(saved))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "refused:" in out and "read-only" in out, out
    assert "fallback: True the file is read-only" in out
    assert "docs: ['Chapter 1']" in out


def test_a_healthy_project_in_a_read_only_folder_opens_read_only(saved):
    before = file_digest(saved)
    saved.parent.chmod(0o555)
    try:
        result = run_as_user(OPEN_AND_REPORT, str(saved))
    finally:
        saved.parent.chmod(0o755)
    assert result.returncode == 0, result.stderr
    assert "damaged" not in result.stdout, result.stdout
    assert "fallback: True its folder is read-only" in result.stdout
    assert "docs: ['Chapter 1']" in result.stdout
    assert file_digest(saved) == before


def test_unread_changes_in_a_read_only_folder_are_refused_clearly(saved, tmp_path):
    # a -wal that still holds changes: a kill left it, then the folder became read-only
    code = textwrap.dedent(
        """
        import os, signal, sys
        from swiftwriter.store import Project
        p = Project.open(sys.argv[1])
        p.db.execute("PRAGMA wal_autocheckpoint = 0")
        p._checkpoint = lambda: None
        p.add_document("Chapter 2", "only in the journal")
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    subprocess.run([sys.executable, "-c", code, str(saved)], timeout=60)
    assert os.path.getsize(f"{saved}-wal") > 0
    saved.parent.chmod(0o555)
    try:
        result = run_as_user(OPEN_AND_REPORT, str(saved))
    finally:
        saved.parent.chmod(0o755)
    assert "recent changes" in result.stderr + result.stdout
    assert "damaged" not in result.stderr + result.stdout


def test_the_project_file_alone_holds_every_committed_change(saved, tmp_path):
    """A writer copies or syncs the one file: what was committed before a crash is in it."""
    code = textwrap.dedent(
        """
        import os, signal, sys
        from swiftwriter.store import Project
        p = Project.open(sys.argv[1])
        p.add_document("Chapter 2", "precious")
        doc = p.documents()[0]
        p.update_text(doc.id, "It was a bright cold day, and the clocks were striking.")
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    subprocess.run([sys.executable, "-c", code, str(saved)], timeout=60)
    copy = tmp_path / "copy" / saved.name
    copy.parent.mkdir()
    shutil.copyfile(saved, copy)  # the file only: no -wal beside it
    with Project.open(copy, readonly=True) as p:
        docs = p.documents()
        assert [d.title for d in docs] == ["Chapter 1", "Chapter 2"]
        assert p.document(docs[0].id).text.endswith("striking.")
        assert p.integrity_check() == "ok"


def test_a_copy_taken_while_the_project_is_open_is_complete(saved, tmp_path):
    with Project.open(saved) as p:
        p.add_document("Chapter 2", "written a moment ago")
        copy = tmp_path / "snapshot.swiftwriter"
        shutil.copyfile(saved, copy)
        with Project.open(copy, readonly=True) as c:
            assert [d.title for d in c.documents()] == ["Chapter 1", "Chapter 2"]


def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(saved, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    lock_mod.lock_path_for(saved).symlink_to(victim)
    with pytest.raises(ProjectError, match="symbolic link"):
        Project.open(saved)
    assert victim.read_text() == "keep me"
    with Project.open(saved, readonly=True) as p:  # reading needs no lock
        assert p.documents()


def test_creating_never_follows_a_planted_temporary_name(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    path = tmp_path / "New.swiftwriter"
    (tmp_path / f".{path.name}.{os.getpid()}.creating").symlink_to(victim)
    Project.create(path, title="New").close()
    assert victim.read_text() == "keep me"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".creating") and p.is_file()
                and not p.is_symlink()]  # fmt: skip


def test_a_refused_file_is_left_without_new_side_files(tmp_path):
    foreign = tmp_path / "Other.swiftwriter"
    conn = sqlite3.connect(foreign)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    before = sorted(p.name for p in tmp_path.iterdir())
    digest = file_digest(foreign)
    with pytest.raises(ProjectError, match="not a SwiftWriter project"):
        Project.open(foreign)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert file_digest(foreign) == digest


def test_a_failed_lock_write_does_not_leave_the_project_locked(saved, monkeypatch):
    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(lock_mod.ProjectLock, "_write_holder", staticmethod(full_disk))
    with pytest.raises(ProjectError, match="the disk is full"):
        Project.open(saved)
    monkeypatch.undo()
    with Project.open(saved) as p:  # the lock was given back
        assert not p.readonly


def test_killed_writer_leaves_the_file_consistent_for_the_next_open(saved):
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom swiftwriter.store import Project\n"
         "p = Project.open(sys.argv[1])\nprint('open', flush=True)\ntime.sleep(60)", str(saved)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout.readline().strip() == "open"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    with Project.open(saved) as p:
        assert p.integrity_check() == "ok"


def test_a_project_missing_a_table_is_refused_in_one_line(saved, capsys):
    from swiftwriter.cli import main

    conn = sqlite3.connect(saved)
    conn.execute("DROP TABLE notes")
    conn.commit()
    conn.close()
    digest = file_digest(saved)
    with pytest.raises(ProjectError, match="notes table is missing"):
        Project.open(saved)
    assert main(["project", "docs", str(saved)]) == 1
    err = capsys.readouterr().err
    assert "notes table is missing" in err and "Traceback" not in err
    assert file_digest(saved) == digest


def test_a_damaged_token_record_keeps_the_history_readable(saved, capsys):
    from swiftwriter.cli import main

    with Project.open(saved) as p:
        doc = p.documents()[0]
        rec = p.start_generation(doc.id, "p", "m", "t", {}, 0)
        rec.append(" more", [10, 11, 12])
        gen = rec.finish("finished", {}, append_to_document=True)
        p.db.execute(
            "UPDATE generations SET token_ids = ? WHERE id = ?", [b"\x01\x00\x00\x00\x07", gen.id]
        )
    with Project.open(saved) as p:
        assert p.generation(gen.id).token_ids == [1]  # the whole ids before the cut
    assert main(["project", "history", str(saved)]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_a_read_that_meets_damage_is_one_line(saved):
    with Project.open(saved) as p:
        p.db.execute("ALTER TABLE documents RENAME COLUMN title TO name")
        with pytest.raises(ProjectError, match="damaged"):
            p.documents()


def test_a_failed_migration_leaves_the_file_byte_identical(tmp_path, monkeypatch):
    from swiftwriter.store import schema

    old = tmp_path / "Old.swiftwriter"
    conn = sqlite3.connect(old)
    db = __import__("sqlite_utils").Database(conn)
    schema.migrate(db, target=schema.SCHEMA_VERSION - 1)  # an older format, rollback journal
    conn.execute(
        "INSERT INTO documents (kind, title, text, position) VALUES ('chapter', 'A', 'x', 0)"
    )
    conn.commit()
    conn.close()
    before = file_digest(old)

    def broken(db):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setitem(schema.MIGRATIONS, schema.SCHEMA_VERSION, broken)
    with pytest.raises(ProjectError, match="disk I/O error"):
        Project.open(old)
    assert file_digest(old) == before
    assert old.with_name(f"{old.name}.format{schema.SCHEMA_VERSION - 1}.bak").exists()

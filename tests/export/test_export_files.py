"""Exports never write through links, pipes or read-only files, sync before they take the
name, clean up after an interrupted export, and a failing disk is one clear line."""

from __future__ import annotations

import errno
import os
import textwrap
from pathlib import Path

import pytest
from swiftwriter.errors import UserError
from swiftwriter.export.files import write_atomically

from tests.conftest import run_as_user


def write_text(text):
    return lambda tmp: Path(tmp).write_text(text)


def test_a_symlinked_target_is_refused_and_its_target_untouched(tmp_path):
    victim = tmp_path / "victim.md"
    victim.write_text("keep me")
    link = tmp_path / "out.md"
    link.symlink_to(victim)
    with pytest.raises(UserError, match="symbolic link"):
        write_atomically(link, write_text("new"))
    assert victim.read_text() == "keep me" and link.is_symlink()


def test_a_pipe_is_not_replaced(tmp_path):
    fifo = tmp_path / "out.md"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="not an ordinary file"):
        write_atomically(fifo, write_text("new"))
    assert fifo.is_fifo()


def test_a_read_only_target_is_not_replaced(tmp_path):
    target = tmp_path / "out.md"
    target.write_text("final draft")
    target.chmod(0o444)
    code = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from swiftwriter.errors import UserError
        from swiftwriter.export.files import write_atomically
        try:
            write_atomically(sys.argv[1], lambda tmp: Path(tmp).write_text("new"))
            print("replaced")
        except UserError as exc:
            print("refused:", exc)
        """
    )
    result = run_as_user(code, str(target))
    assert "refused:" in result.stdout and "read-only" in result.stdout, result
    assert target.read_text() == "final draft"


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EFBIG, errno.EACCES])
def test_a_failing_disk_is_one_line_and_leaves_nothing_behind(tmp_path, code):
    target = tmp_path / "out.docx"
    target.write_text("previous export")

    def fail(tmp):
        Path(tmp).write_text("half")
        raise OSError(code, os.strerror(code))

    with pytest.raises(UserError, match=f"Could not export to .*{os.strerror(code)}"):
        write_atomically(target, fail)
    assert target.read_text() == "previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.docx"]


def test_the_new_file_is_synced_before_it_takes_the_name(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")),
                                                 real(fd)))  # fmt: skip
    target = tmp_path / "out.md"
    write_atomically(target, write_text("done"))
    assert any(s.endswith(".partial") for s in synced)  # the file, before the rename
    assert str(tmp_path) in synced  # and the folder, after it
    assert target.read_text() == "done"


def test_partials_of_an_interrupted_export_are_removed_next_time(tmp_path):
    stale = tmp_path / ".out.md.k3j2.partial"
    stale.write_text("half of a killed export")
    other = tmp_path / ".notes.md.x1.partial"
    other.write_text("another name's export in progress")
    write_atomically(tmp_path / "out.md", write_text("done"))
    assert not stale.exists() and other.exists()


def test_a_long_name_exports_and_a_name_too_long_is_one_line(tmp_path):
    long_name = tmp_path / ("é" * 120 + ".md")  # 245 bytes: '.NAME.xxx.partial' would not fit
    write_atomically(long_name, write_text("kept"))
    assert long_name.read_text() == "kept" and not list(tmp_path.glob(".*.partial"))
    stale = tmp_path / (".[x].md" + ".abc.partial")  # a name with glob characters
    stale.write_text("old")
    other = tmp_path / ".x.md.abc.partial"  # another name's partial, matched by '[x]'
    other.write_text("another export's")
    write_atomically(tmp_path / "[x].md", write_text("new"))
    assert not stale.exists() and other.read_text() == "another export's"
    with pytest.raises(UserError, match="File name too long"):
        write_atomically(tmp_path / ("f" * 300 + ".md"), write_text("never"))

"""atomic.py, the one whole-file replacement: a failure midway (or a Cancel raised by the
writer) leaves the old file and no temporary; a link stays a link; an existing file keeps its
mode; text, bytes and streamed writes all go the same way."""

from __future__ import annotations

import os

import pytest
from swiftwriter import atomic


def partials(folder):
    return [p.name for p in folder.iterdir() if p.name.endswith(atomic.PARTIAL)]


def test_a_failing_writer_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "notes.json"
    target.write_text("old")

    def half_then_fail(tmp: str) -> None:
        with open(tmp, "w") as out:
            out.write("half of the new")
        raise KeyboardInterrupt  # a Cancel, a killed export: anything at all

    with pytest.raises(KeyboardInterrupt):
        atomic.replace_with(target, half_then_fail)
    assert target.read_text() == "old" and partials(tmp_path) == []


def test_a_link_stays_a_link_and_the_mode_is_kept(tmp_path):
    real = tmp_path / "real.toml"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    atomic.replace_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert real.stat().st_mode & 0o777 == 0o640


def test_bytes_streams_and_a_mode_for_new_files(tmp_path):
    atomic.replace_bytes(tmp_path / "a.bin", b"\x00\xff")
    assert (tmp_path / "a.bin").read_bytes() == b"\x00\xff"

    def stream(tmp: str) -> None:
        with open(tmp, "w") as out:
            for piece in ("str", "eamed"):
                out.write(piece)

    written = atomic.replace_with(tmp_path / "b.txt", stream, mode=0o644)
    assert written.read_text() == "streamed" and written.stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "a.bin").stat().st_mode & 0o777 == 0o600  # private unless told
    assert partials(tmp_path) == []


def test_locked_is_exclusive_across_open_files(tmp_path):
    from filelock import FileLock, Timeout

    target = tmp_path / "measurements.json"
    with atomic.locked(target):
        lock_file = atomic.lock_file(target)
        with pytest.raises(Timeout):
            FileLock(lock_file, timeout=0.1).acquire()
    with FileLock(lock_file, timeout=1):
        pass  # released again
    assert os.listdir(tmp_path) == []  # nothing beside the writer's file
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert atomic.lock_file(link) == lock_file  # one lock for the file, whatever its name

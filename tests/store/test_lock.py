"""One writer at a time: a second writer is refused (or gets a read-only view that says why),
and a lock left by a dead process never blocks."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from swiftwriter.store import Project, ProjectError, ProjectLockedError
from swiftwriter.store.lock import ProjectLock, lock_path_for


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_second_writer_is_refused_and_may_fall_back_to_read_only(project, project_path):
    doc = project.add_document("Chapter", "text")
    with pytest.raises(ProjectLockedError, match=f"process {os.getpid()}") as info:
        Project.open(project_path)
    assert info.value.holder.pid == os.getpid()
    assert "read-only" in str(info.value)
    with Project.open(project_path, fallback_readonly=True) as view:
        assert view.readonly
        assert "open in another SwiftWriter" in view.readonly_reason
        assert view.writer_elsewhere()
        assert view.document(doc.id).text == "text"
        project.update_text(doc.id, "newer")  # the writer goes on; the view sees it
        assert view.document(doc.id).text == "newer"
    project.close()
    assert not lock_path_for(project_path).exists()
    with Project.open(project_path) as again:
        assert not again.readonly


def test_lock_file_of_a_dead_process_does_not_block(project_path):
    Project.create(project_path).close()
    lock = lock_path_for(project_path)
    lock.write_text(
        json.dumps({"pid": dead_pid(), "host": socket.gethostname(), "since": "yesterday"})
    )
    with Project.open(project_path) as proj:
        assert not proj.readonly
        assert json.loads(lock.read_text())["pid"] == os.getpid()


def test_without_os_locks_the_recorded_pid_decides(project_path, monkeypatch):
    """File systems that cannot lock: a live holder on this host blocks, a dead one does not."""
    Project.create(project_path).close()
    monkeypatch.setattr(ProjectLock, "_os_lock", staticmethod(lambda fd: None))
    lock = lock_path_for(project_path)
    host = socket.gethostname()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        lock.write_text(json.dumps({"pid": sleeper.pid, "host": host, "since": "now"}))
        with pytest.raises(ProjectLockedError, match=f"process {sleeper.pid}"):
            Project.open(project_path)
    finally:
        sleeper.kill()
        sleeper.wait()
    lock.write_text(json.dumps({"pid": dead_pid(), "host": host, "since": "then"}))
    with Project.open(project_path) as proj:
        assert not proj.readonly


def test_lock_file_that_cannot_be_made_is_a_clear_error(project_path, monkeypatch):
    Project.create(project_path).close()

    def refuse(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(ProjectLock, "acquire", refuse)
    with pytest.raises(ProjectError, match="open it read-only"):
        Project.open(project_path)
    with Project.open(project_path, readonly=True) as view:  # needs no lock
        assert view.readonly

"""Fixtures for the store tests: a fresh project in a temporary folder."""

from __future__ import annotations

import hashlib

import pytest
from swiftwriter.store import Project


@pytest.fixture
def project_path(tmp_path):
    return tmp_path / "Novel.swiftwriter"


@pytest.fixture
def project(project_path):
    proj = Project.create(project_path, title="My novel", author="A. Writer")
    yield proj
    proj.close()


def file_digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_as_user(code: str, *args: str):
    """Run python `code` in a child where file modes apply: as root, the child drops the
    capabilities that override them (setpriv); an ordinary user needs nothing dropped."""
    import os
    import subprocess
    import sys

    command = [sys.executable, "-c", code, *args]
    if os.geteuid() == 0:
        caps = "-dac_override,-dac_read_search,-fowner"
        command = ["setpriv", "--bounding-set", caps, "--inh-caps", caps, *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)

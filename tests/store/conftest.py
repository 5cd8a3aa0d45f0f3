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

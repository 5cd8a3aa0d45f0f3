"""Fixtures of the fault matrix: a project with one saved chapter, and a child environment whose
data, config and log folders are the test's own."""

from __future__ import annotations

import pytest
from swiftwriter.store import Project

from tests.fault_matrix.common import BASE, child_env


@pytest.fixture
def env(tmp_path):
    return child_env(tmp_path)


@pytest.fixture
def project(tmp_path):
    path = tmp_path / "Novel.swiftwriter"
    with Project.create(path, title="Novel") as p:
        p.add_document("Chapter 1", BASE)
    return path

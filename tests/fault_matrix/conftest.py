"""Fixtures of the fault matrix: a project with one saved chapter, and a child environment whose
data, config and log folders are the test's own."""

from __future__ import annotations

import os

import pytest
from swiftwriter.store import Project

from tests.fault_matrix.common import BASE


@pytest.fixture
def env(tmp_path):
    return {
        **os.environ,
        "SWIFTWRITER_DATA_DIR": str(tmp_path / "data"),
        "SWIFTWRITER_MODELS_DIR": str(tmp_path / "data" / "models"),
        "SWIFTWRITER_CONFIG_DIR": str(tmp_path / "config"),
        "SWIFTWRITER_LOG_DIR": str(tmp_path / "logs"),
    }


@pytest.fixture
def project(tmp_path):
    path = tmp_path / "Novel.swiftwriter"
    with Project.create(path, title="Novel") as p:
        p.add_document("Chapter 1", BASE)
    return path

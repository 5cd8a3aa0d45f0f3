"""A fresh user: empty config, data and models folders of the test's own."""

from __future__ import annotations

import pytest


@pytest.fixture
def user_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("SWIFTWRITER_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("SWIFTWRITER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SWIFTWRITER_MODELS_DIR", str(tmp_path / "data" / "models"))
    return tmp_path

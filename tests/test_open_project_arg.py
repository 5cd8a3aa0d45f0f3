"""`swiftwriter PROJECT`: what a file manager runs for a double-clicked project (the .desktop
file's %f) opens the app on it; anything else still goes to the command parser."""

from __future__ import annotations

import pytest
from swiftwriter import cli
from swiftwriter.ui import app


@pytest.fixture
def opened(monkeypatch):
    calls = []
    monkeypatch.setattr(app, "run_app", lambda **kw: calls.append(kw) or 0)
    return calls


def test_a_lone_project_path_opens_the_app_on_it(tmp_path, opened):
    project = tmp_path / "My Novel.swiftwriter"
    project.write_bytes(b"")
    assert cli.main([str(project)]) == 0
    assert opened == [{"model": None, "project": str(project)}]


def test_a_missing_project_is_a_usage_error_not_an_empty_app(tmp_path, opened, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([str(tmp_path / "gone.swiftwriter")])
    assert exc.value.code == 2 and opened == []

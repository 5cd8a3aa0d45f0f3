"""The app starts on the default model and shows the main window (headless)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.default_model
def test_run_command_opens_app_on_default_model():
    """What `make run` does, minus the event loop: start, load the default model, quit."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", SWIFTWRITER_EXIT_WHEN_READY="1")
    result = subprocess.run(
        [sys.executable, "-m", "swiftwriter"], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ready: smollm2-135m-instruct" in result.stdout


def test_main_window_reports_a_bad_model(qtbot, tmp_path, monkeypatch):
    from swiftwriter.ui.main_window import MainWindow

    monkeypatch.setenv("SWIFTWRITER_CONFIG_DIR", str(tmp_path))
    window = MainWindow(load_model=False)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.model_failed, timeout=30000) as blocker:
        window.load_model(str(tmp_path / "missing-model"))
    assert "Unknown model" in blocker.args[0]
    assert window.model_label.text() == "Model not loaded"

"""The app starts on the default model and shows the main window (headless)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.default_model
def test_run_command_opens_app_on_default_model():
    """What `make run` does, minus the event loop: start, load the default model, quit."""
    from tests.conftest import TEST_ROOT

    # the session's models (the writer's converted default model, linked) and data, not this
    # test's: a second start, which finds the precision measured by an earlier one (a first
    # start measures it: test_default_model's command line does, ~30 s)
    models = str(TEST_ROOT / "models")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", SWIFTWRITER_EXIT_WHEN_READY="1",
               SWIFTWRITER_MODELS_DIR=models, SWIFTWRITER_DATA_DIR=str(TEST_ROOT / "data"))  # fmt: skip
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
        window.models.load_model(str(tmp_path / "missing-model"))
    assert "Unknown model" in blocker.args[0]
    assert window.model_label.text() == "Model not loaded"


def test_workers_that_finish_at_once_lose_no_message(qtbot, tmp_path, monkeypatch):
    """A worker may finish before start_* returns (a failure, a cached model): its signals must
    already be connected, or the GUI waits for ever on a message that was sent into nothing."""
    from swiftwriter.ui import model_worker, stoppable
    from swiftwriter.ui.main_window import MainWindow

    class InstantThread(stoppable.QThread):
        def start(self):  # runs the worker here and now, the worst case of a fast thread
            self.started.emit()

    monkeypatch.setattr(stoppable, "QThread", InstantThread)  # the one thread starter's
    # the worker stays on this thread, so `started` calls its run() directly inside start()
    monkeypatch.setattr(model_worker.ModelLoader, "moveToThread", lambda self, thread: None)
    monkeypatch.setenv("SWIFTWRITER_CONFIG_DIR", str(tmp_path))
    window = MainWindow(load_model=False)
    qtbot.addWidget(window)
    failures = []
    window.model_failed.connect(failures.append)
    window.models.load_model(str(tmp_path / "missing-model"))
    assert failures and "Unknown model" in failures[0]
    assert window.model_label.text() == "Model not loaded"

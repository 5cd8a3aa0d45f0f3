"""Screenshots of the main window during and after a generation, for a look by eye: written
into the test's temporary folder, or, with SWIFTWRITER_REFRESH_SCREENSHOTS=1, over the README's
pictures in resources/screenshots/ (so an ordinary test run never leaves the tree changed)."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QObject, Slot
from PySide6.QtGui import QImage

COMMITTED = Path(__file__).resolve().parents[2] / "resources" / "screenshots"


def test_screenshots_during_and_after_a_generation(qtbot, window, tmp_path):
    from swiftwriter.ui.settings import apply_theme
    from swiftwriter.writing import baseline

    refresh = os.environ.get("SWIFTWRITER_REFRESH_SCREENSHOTS") == "1"
    SHOTS = COMMITTED if refresh else tmp_path / "screenshots"  # noqa: N806
    baseline.clear_cache()  # a fresh plain-decoding measurement at this context
    SHOTS.mkdir(parents=True, exist_ok=True)
    window.settings.theme = "Light"
    apply_theme("Light")
    window.resize(1280, 800)
    assert window.projects.open_sample(tmp_path / "samples")
    window.tree.select(window.project.documents()[2].id)  # Chapter 2: The Letter
    window.panel.set_target(160, "tokens")
    shots: dict[str, Path] = {}

    class Shooter(QObject):
        """Lives in the GUI thread, so the worker's stats reach it queued: a widget may only
        be painted (grabbed) there; a plain function would run in the worker's thread."""

        @Slot(object)
        def during(self, stats) -> None:
            if "during" not in shots and stats.tokens >= 60:
                shots["during"] = SHOTS / "main-window-generating.png"
                assert window.grab().save(str(shots["during"]))

    shooter = Shooter()
    window.takes.started.connect(lambda: window.takes.worker.stats.connect(shooter.during))
    with qtbot.waitSignal(window.takes.finished, timeout=30000):
        window.actions_by_name["generate"].trigger()
    qtbot.waitUntil(lambda: not window.takes.busy, timeout=30000)
    qtbot.wait(50)  # let the last repaint land
    shots["after"] = SHOTS / "main-window.png"
    assert window.grab().save(str(shots["after"]))
    assert set(shots) == {"during", "after"}
    for path in shots.values():
        image = QImage(str(path))
        assert image.width() >= 1000 and image.height() >= 600

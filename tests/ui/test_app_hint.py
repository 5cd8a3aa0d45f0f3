"""Desktop citizenship: the one-line hint when Qt's xcb libraries are missing, and the app's
icon and desktop file name."""

from __future__ import annotations

import ctypes.util
import sys
from pathlib import Path

import pytest
from swiftwriter.ui import app


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="xcb is Linux's")
def test_missing_xcb_libraries_give_one_line_naming_the_packages(monkeypatch):
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    hint = app.xcb_hint()
    assert hint is not None and "\n" not in hint and "libxcb-cursor0" in hint
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: f"lib{name}.so")
    assert app.xcb_hint() is None
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    assert app.xcb_hint() is None  # another platform plugin: nothing to say


def test_the_icon_ships_and_loads(qtbot):
    icon = app.app_icon()
    assert not icon.isNull() and icon.availableSizes()
    packaging = Path(__file__).parents[2] / "packaging"
    assert (packaging / f"{app.DESKTOP_ID}.desktop").is_file()

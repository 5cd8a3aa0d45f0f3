"""The Help menu: the manual is docs/manual.md (shipped, in sync), every
shortcut is listed, and About names the versions and the folders a bug report needs."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from PySide6.QtWidgets import QTableWidget, QTextBrowser

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_manual_is_the_docs_manual():
    spec = importlib.util.spec_from_file_location("manual", ROOT / "resources/dev/manual.py")
    manual = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(manual)
    source = (ROOT / "docs" / "manual.md").read_text(encoding="utf-8")
    shipped = (ROOT / "resources/help/manual.md").read_text(encoding="utf-8")
    assert shipped == manual.manual_from(source), "run resources/dev/manual.py"
    assert "## Your work is safe" in shipped and "## Your own models" in shipped
    assert "Earlier measurements" not in shipped  # the measurements stay in docs/
    for picture in re.findall(r"\]\((resources/[^)]+)\)", shipped):
        assert (ROOT / picture).is_file(), picture


def test_help_menu_opens_the_manual_shortcuts_and_about(window, qtbot, tmp_path):
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    names = [a.text() for a in menu.actions() if a.text()]
    assert names == ["Manual", "Keyboard shortcuts", "Show log folder", "About SwiftWriter"]

    window.actions_by_name["manual"].trigger()
    manual = window.findChild(QTextBrowser, "manual")
    assert manual is not None and "Your work is safe" in manual.toPlainText()

    window.actions_by_name["shortcuts"].trigger()
    tables = [t for t in window.findChildren(QTableWidget) if t.columnCount() == 2]
    rows = {
        (tables[-1].item(i, 0).text(), tables[-1].item(i, 1).text())
        for i in range(tables[-1].rowCount())
    }
    assert ("Manual", "F1") in rows and ("Generate", "Ctrl+Return, Ctrl+Enter") in rows

    from swiftwriter import logs, paths
    from swiftwriter.ui.help import show_about

    box = show_about(window)
    text = box.text()
    for folder in (paths.data_dir(), paths.config_dir(), logs.log_dir()):
        assert str(folder) in text
    assert "torch " in text and "transformers " in text and "Apache" in text
    box.close()


def test_about_names_the_qt_binding_this_process_runs():
    """PySide6 may come as the PySide6_Essentials distribution, with no 'PySide6' of its own:
    About said 'PySide6 not installed' while the app ran on it (issue 63)."""
    import PySide6
    from PySide6.QtCore import qVersion
    from swiftwriter.ui.help import about_text

    text = about_text()
    assert f"PySide6 {PySide6.__version__}<br>" in text and f"Qt {qVersion()}" in text
    assert "PySide6 not installed" not in text

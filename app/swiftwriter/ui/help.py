"""The Help menu's windows: the manual (the README's sections for writers, shipped as
resources/help/manual.md), the keyboard shortcuts of every menu action, and About (versions and
the folders where SwiftWriter keeps things, for a bug report)."""

from __future__ import annotations

import platform
import sys
from importlib import metadata

from PySide6.QtCore import qVersion
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QMessageBox,
    QTableWidget,
    QTableWidgetItem,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from swiftwriter import __version__, logs, paths

PACKAGES = ("PySide6", "torch", "transformers", "accelerate")


def manual_markdown() -> str:
    return (paths.resources_dir() / "help" / "manual.md").read_text(encoding="utf-8")


def _window(parent: QWidget | None, title: str, body: QWidget, size=(760, 620)) -> QDialog:
    dialog = QDialog(parent)
    dialog.setWindowTitle(title)
    layout = QVBoxLayout(dialog)
    layout.addWidget(body, 1)
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
    buttons.rejected.connect(dialog.close)
    layout.addWidget(buttons)
    dialog.resize(*size)
    dialog.show()
    return dialog


def show_manual(parent: QWidget | None = None) -> QDialog:
    browser = QTextBrowser()
    browser.setOpenExternalLinks(True)
    # the manual's pictures are named from the top of the checkout (resources/screenshots/...),
    # which is also where they sit inside the installed package
    browser.setSearchPaths([str(paths.resources_dir().parent)])
    browser.setMarkdown(manual_markdown())
    browser.setObjectName("manual")
    return _window(parent, "SwiftWriter manual", browser)


def shortcut_rows(actions: dict[str, QAction]) -> list[tuple[str, str]]:
    """(what, keys) for every action with a shortcut, in menu wording, sorted by name."""
    rows = []
    for action in actions.values():
        keys = ", ".join(k.toString() for k in action.shortcuts() if not k.isEmpty())
        if keys:
            rows.append((action.text().replace("&", "").rstrip("…"), keys))
    return sorted(rows)


def show_shortcuts(parent: QWidget | None, actions: dict[str, QAction]) -> QDialog:
    rows = shortcut_rows(actions)
    table = QTableWidget(len(rows), 2)
    table.setHorizontalHeaderLabels(["Action", "Keys"])
    for i, (what, keys) in enumerate(rows):
        table.setItem(i, 0, QTableWidgetItem(what))
        table.setItem(i, 1, QTableWidgetItem(keys))
    table.resizeColumnsToContents()
    table.horizontalHeader().setStretchLastSection(True)
    table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    return _window(parent, "Keyboard shortcuts", table, size=(520, 560))


def _version(package: str) -> str:
    """The version of the module this process imported where it is loaded: a distribution's
    name need not be the module's (PySide6 comes as PySide6_Essentials, for one)."""
    version = getattr(sys.modules.get(package), "__version__", None)
    if version:
        return str(version)
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def qt_version() -> str:

    return qVersion()


def about_text() -> str:

    versions = [f"SwiftWriter {__version__}", f"Python {platform.python_version()}"]
    versions += [f"{name} {_version(name)}" for name in PACKAGES]
    versions.append(f"Qt {qt_version()}")
    folders = [
        ("Data (models, backups, unsaved text)", paths.data_dir()),
        ("Settings and registered models", paths.config_dir()),
        ("Log", logs.log_dir()),
    ]
    lines = [
        "<h3>SwiftWriter</h3>",
        "<p>A writing assistant whose local model writes long texts faster than plain decoding, "
        "every token the model's own (TokenSwift). Licensed under the Apache License 2.0.</p>",
        "<p>" + "<br>".join(versions) + "</p>",
        "<p>" + "<br>".join(f"{what}: <code>{where}</code>" for what, where in folders) + "</p>",
    ]
    return "".join(lines)


def show_about(parent: QWidget | None = None) -> QMessageBox:
    box = QMessageBox(parent)
    box.setWindowTitle("About SwiftWriter")
    box.setTextFormat(box.textFormat().RichText)
    box.setText(about_text())
    box.open()
    return box

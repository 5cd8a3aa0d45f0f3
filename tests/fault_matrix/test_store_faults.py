"""Fault matrix rows for the store: hostile project files (deep trees, parent cycles, stored
settings out of range, planted triggers), backups and restores killed or planted with links,
file systems without hard links, damaged backups, a clock a year fast and a killed migration
(shared checks in `common.py`)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

from swiftwriter.store import Project

from tests.fault_matrix.common import BASE, CLI, check_project, digest

DEEP = 3000


def _hostile_tree(project) -> None:
    """A 3,000-deep chain, a parent cycle and panel settings out of every range."""
    with Project.open(project) as p:
        a = p.add_document("Cycle A", "alpha")
        b = p.add_document("Cycle B", "beta", parent_id=a.id)
        settings = {"length": 1e300, "temperature": float("nan"), "top_k": 10**30, "seed": -1}
        p.update_meta(generation_settings=json.dumps(settings))
    conn = sqlite3.connect(project)
    conn.execute("UPDATE documents SET parent_id = ? WHERE id = ?", [b.id, a.id])
    conn.executemany(
        "INSERT INTO documents (id, parent_id, kind, title, text, position) "
        "VALUES (?, ?, 'section', ?, 'deep', 0)",
        [(100 + i, 99 + i if i else None, f"Level {i}") for i in range(DEEP)],
    )
    conn.commit()
    conn.close()


WINDOW = """
import sys
from PySide6.QtWidgets import QApplication
app = QApplication([])
from swiftwriter.ui.main_window import MainWindow
window = MainWindow(load_model=False)
window.ask = lambda title, text: True
assert window.open_project(sys.argv[1])
window.show()
app.processEvents()
print(len(window.tree.ids_in_order()), window.panel.length.value() <= window.panel.length.maximum())
window.close_project()
"""


def test_hostile_tree_and_settings(project, env, tmp_path):
    _hostile_tree(project)
    before = digest(project)
    listed = subprocess.run([*CLI, "project", "docs", str(project)], env=env,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert listed.stdout.count("\n") == 1 + 1 + 2 + DEEP  # title, chapter, the cycle, the chain
    assert "Cycle A" in listed.stdout and f"Level {DEEP - 1}" in listed.stdout
    assert listed.stderr.count("parent cycle") <= 1
    out = tmp_path / "book.md"
    exported = subprocess.run([*CLI, "export", str(project), "--out", str(out)], env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    assert exported.returncode == 0 and "Traceback" not in exported.stderr, exported.stderr
    assert "Cycle B" in out.read_text(encoding="utf-8")
    assert digest(project) == before  # listing and export read only
    window = subprocess.run([sys.executable, "-c", WINDOW, str(project)],
                            env={**env, "QT_QPA_PLATFORM": "offscreen"},
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert window.returncode == 0, window.stderr[-2000:]
    assert window.stdout.split() == [str(DEEP + 3), "True"]
    check_project(project, [BASE, "alpha", "beta"])

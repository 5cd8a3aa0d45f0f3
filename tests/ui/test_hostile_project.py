"""A hostile project file opens in the window: a document tree thousands deep, a parent cycle
and stored panel settings out of every range (huge, NaN, negative, the wrong type)."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest
from swiftwriter.store import Project
from swiftwriter.ui.panel_state import PROJECT_KEY, apply_state

DEEP = 3000


def make_hostile(path, settings: dict) -> None:
    """A project whose tree is a 3,000-deep chain plus a two-document parent cycle."""
    with Project.create(path, title="Hostile") as p:
        a = p.add_document("Cycle A", "alpha")
        b = p.add_document("Cycle B", "beta", parent_id=a.id)
        p.update_meta(**{PROJECT_KEY: json.dumps(settings)})
    conn = sqlite3.connect(path)
    conn.execute("UPDATE documents SET parent_id = ? WHERE id = ?", [b.id, a.id])
    conn.executemany(
        "INSERT INTO documents (id, parent_id, kind, title, text, position) "
        "VALUES (?, ?, 'section', ?, 'deep words', 0)",
        [(100 + i, 99 + i if i else None, f"Level {i}") for i in range(DEEP)],
    )
    conn.commit()
    conn.close()


HOSTILE = {"length": 1e300, "temperature": float("nan"), "top_p": -5.0, "min_p": float("inf"),
           "penalty": 1e300, "top_k": 10**30, "window": -(10**30), "seed": 2**70,
           "unit": ["words"], "keep_writing": "yes"}  # fmt: skip


@pytest.mark.parametrize("key", sorted(k for k in HOSTILE if k not in ("unit", "keep_writing")))
def test_stored_numbers_out_of_range_are_clamped_or_skipped(qtbot, window, key):
    widget = getattr(window.panel, key)
    apply_state(window.panel, {key: HOSTILE[key]})
    value = widget.value()
    assert not math.isnan(value) and widget.minimum() <= value <= widget.maximum()


def test_the_window_opens_a_hostile_project(qtbot, window, tmp_path):
    path = tmp_path / "Hostile.swiftwriter"
    make_hostile(path, HOSTILE)
    assert window.projects.open_project(path)
    ids = window.tree.ids_in_order()
    assert len(ids) == DEEP + 2 and set(ids) >= {1, 2, 100, 99 + DEEP}
    window.tree.select(99 + DEEP)
    assert window.tree.current_id() == 99 + DEEP
    dialog = window.exchange.export_dialog()
    dialog.format.setCurrentIndex(dialog.format.findData("md"))
    out = tmp_path / "hostile.md"
    with qtbot.waitSignal(window.export_done, timeout=20000):
        assert dialog.export_to(out)
    text = out.read_text(encoding="utf-8")
    assert "Cycle A" in text and "Cycle B" in text and f"Level {DEEP - 1}" in text
    dialog.close()
    assert window.projects.close_project()

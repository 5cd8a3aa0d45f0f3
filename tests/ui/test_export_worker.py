"""Exports run in a worker behind a progress dialog with Cancel: a 200-page ODT export leaves
the window responsive (the longest gap between ticks of a 10 ms timer on the GUI thread stays
under 200 ms), and Cancel kills LibreOffice with what it started and leaves the target as it
was. LibreOffice itself is stood in for by a small program that takes its time and writes
the file (what is measured is the GUI thread); the real one is used where it is installed."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QPushButton
from swiftwriter.export import office
from swiftwriter.export.files import _partial_prefix

from tests.ui.conftest import WORDS

STALL_LIMIT_S = 0.2
PAGES, WORDS_PER_PAGE, CHAPTERS = 200, 250, 40  # a manuscript page holds about 250 words

STAND_IN = """#!{python}
import os, pathlib, subprocess, sys, time
args = sys.argv[1:]
fmt = args[args.index("--convert-to") + 1]
folder = pathlib.Path(args[args.index("--outdir") + 1])
source = pathlib.Path(args[-1])
helper = subprocess.Popen(["sleep", "120"])  # as soffice starts soffice.bin
pathlib.Path({pids!r}).write_text(f"{{os.getpid()}} {{helper.pid}}")
time.sleep({seconds})
(folder / f"{{source.stem}}.{{fmt}}").write_bytes(b"converted:" + source.read_bytes())
helper.kill()
"""


def stand_in(tmp_path: Path, seconds: float) -> tuple[Path, Path]:
    """A converter that answers soffice's command line; returns it and the file where it
    writes its own and its helper's process ids."""
    program, pids = tmp_path / "bin" / "soffice", tmp_path / "converter.pids"
    program.parent.mkdir()
    program.write_text(STAND_IN.format(python=sys.executable, pids=str(pids), seconds=seconds))
    program.chmod(0o755)
    return program, pids


def long_novel(seed: int = 7):
    rng = random.Random(seed)
    per_chapter = PAGES * WORDS_PER_PAGE // CHAPTERS
    docs = []
    for n in range(1, CHAPTERS + 1):
        paragraphs = [
            " ".join(rng.choice(WORDS) for _ in range(100)).capitalize() + "."
            for _ in range(per_chapter // 100)
        ]
        docs.append((f"Chapter {n}", "\n\n".join(paragraphs)))
    return docs


class TickGaps:
    """The longest wait between ticks of a 10 ms timer on the GUI thread."""

    def __init__(self):
        self.ticks: list[float] = []
        self.timer = QTimer()
        self.timer.setInterval(10)
        self.timer.timeout.connect(lambda: self.ticks.append(time.perf_counter()))

    def __enter__(self):
        self.ticks.append(time.perf_counter())
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.stop()
        self.ticks.append(time.perf_counter())

    def longest(self) -> float:
        return max(b - a for a, b in zip(self.ticks, self.ticks[1:], strict=False))


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")  # a zombie has ended; only its parent's wait is missing


def odt_dialog(qtbot, window, make_project, docs):
    window.projects.open_project(make_project(docs=docs))
    dialog = window.exchange.export_dialog()
    # what opening a project sets going (highlighting and spell-checking the chapter shown,
    # counting words: up to 70 ms at a time on a busy machine) is over before the export
    qtbot.wait(800)
    index = dialog.format.findData("odt")
    assert index >= 0, "ODT is offered where LibreOffice (here the stand-in) is found"
    dialog.format.setCurrentIndex(index)
    return dialog


def test_a_200_page_odt_export_leaves_the_window_responsive(
    qtbot, window, make_project, tmp_path, monkeypatch
):
    program, _ = stand_in(tmp_path, seconds=1.0)
    monkeypatch.setattr(office, "soffice", lambda: str(program))
    dialog = odt_dialog(qtbot, window, make_project, long_novel())
    out = tmp_path / "The Grey Sea.odt"
    started = time.perf_counter()
    with TickGaps() as gaps, qtbot.waitSignal(window.export_done, timeout=120000) as done:
        assert dialog.export_to(out)
        window.editor.moveCursor(QTextCursor.MoveOperation.End)
        qtbot.keyClicks(window.editor, " Still writing.")  # no modal dialog in the way
    took = time.perf_counter() - started
    assert done.args == [str(out)] and out.read_bytes().startswith(b"converted:PK")
    assert window.editor.toPlainText().endswith(" Still writing.")
    assert took > 1.0 and len(gaps.ticks) > 50  # the measure spans the whole export
    assert gaps.longest() < STALL_LIMIT_S, f"the GUI thread stalled {gaps.longest():.3f} s"
    assert "Exported to" in window.statusBar().currentMessage()


def test_cancel_kills_libreoffice_and_leaves_the_target_as_it_was(
    qtbot, window, make_project, tmp_path, monkeypatch
):
    program, pids = stand_in(tmp_path, seconds=120)
    monkeypatch.setattr(office, "soffice", lambda: str(program))
    dialog = odt_dialog(qtbot, window, make_project, long_novel()[:4])
    out = tmp_path / "book.odt"
    out.write_bytes(b"the writer's earlier export")
    with qtbot.waitSignal(window.export_done, timeout=60000) as done:
        assert dialog.export_to(out)
        qtbot.waitUntil(pids.exists, timeout=30000)  # LibreOffice is converting
        converter, helper = map(int, pids.read_text().split())
        window.exchange._export.progress.findChild(QPushButton).click()  # the dialog's Cancel
    assert done.args == [""]
    assert not alive(converter) and not alive(helper), "LibreOffice was left running"
    assert out.read_bytes() == b"the writer's earlier export"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(_partial_prefix(out))]
    assert leftovers == []
    assert "cancelled" in window.statusBar().currentMessage()
    assert window.last_error == ""  # a Cancel is no failure


def test_a_failing_converter_is_one_message_and_no_file(
    qtbot, window, make_project, tmp_path, monkeypatch
):
    program = tmp_path / "soffice"
    program.write_text("#!/bin/sh\necho 'Error: source file could not be loaded' >&2\nexit 1\n")
    program.chmod(0o755)
    monkeypatch.setattr(office, "soffice", lambda: str(program))
    dialog = odt_dialog(qtbot, window, make_project, long_novel()[:2])
    out = tmp_path / "book.odt"
    with qtbot.waitSignal(window.export_done, timeout=60000) as done:
        assert dialog.export_to(out)
    assert done.args == [""] and not out.exists()
    assert "could not be loaded" in window.last_error


@pytest.mark.slow
@pytest.mark.skipif(office.soffice() is None, reason="LibreOffice is not installed here")
def test_real_libreoffice_200_pages_leave_the_window_responsive(
    qtbot, window, make_project, tmp_path
):
    dialog = odt_dialog(qtbot, window, make_project, long_novel())
    out = tmp_path / "The Grey Sea.odt"
    with TickGaps() as gaps, qtbot.waitSignal(window.export_done, timeout=300000) as done:
        assert dialog.export_to(out)
    assert done.args == [str(out)], window.last_error
    assert out.read_bytes()[:2] == b"PK"  # an OpenDocument package
    assert gaps.longest() < STALL_LIMIT_S, f"the GUI thread stalled {gaps.longest():.3f} s"


def test_quitting_during_an_export_cancels_it_first(
    qtbot, window, make_project, tmp_path, monkeypatch
):
    program, pids = stand_in(tmp_path, seconds=120)
    monkeypatch.setattr(office, "soffice", lambda: str(program))
    dialog = odt_dialog(qtbot, window, make_project, long_novel()[:2])
    out = tmp_path / "book.odt"
    assert dialog.export_to(out)
    qtbot.waitUntil(pids.exists, timeout=30000)
    converter, helper = map(int, pids.read_text().split())
    asked = []
    window.ask = lambda title, text: asked.append(title) or True
    assert window.close()
    assert asked[0] == "Export running" and not alive(converter) and not alive(helper)
    assert not out.exists()

"""Fault matrix rows for the window: the app runs headless in a child process (offscreen Qt,
the test's own data, config and settings) and a writer's clicks and answers are played on its
real widgets and message boxes; the parent then checks what the project and the data folder
hold (shared checks in `common.py`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from swiftwriter.store import Project

from tests.fault_matrix.common import BASE, check_project

# The writer's answers: each modal message box gets the next one, clicked on its button.
ANSWERS = """
import sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMessageBox
app = QApplication([])
answers = [a for a in sys.argv[2].split("|") if a]

def answer():
    box = app.activeModalWidget()
    if not isinstance(box, QMessageBox):
        return
    want = answers.pop(0) if answers else "(none left)"
    print("asked:", box.text().replace("\\n", " "), "->", want, flush=True)
    for button in box.buttons():
        if button.text().replace("&", "") == want:
            button.click()
            return
    print("no such button:", want, flush=True)
    box.reject()  # as the writer closing the box

clicker = QTimer(interval=20)
clicker.timeout.connect(answer)
clicker.start()
from swiftwriter.ui.main_window import MainWindow
window = MainWindow(load_model=False, project=sys.argv[1])
window.show()
"""


@pytest.fixture
def ui_env(env, tmp_path):
    return {**env, "QT_QPA_PLATFORM": "offscreen",
            "SWIFTWRITER_SETTINGS_PATH": str(tmp_path / "settings.ini")}  # fmt: skip


def run_window(code: str, env, *args: str) -> list[str]:
    """Run the window with `code` played after it opened; its output lines (it must exit 0
    without a traceback)."""
    done = subprocess.run(
        [sys.executable, "-c", ANSWERS + textwrap.dedent(code), *args],
        capture_output=True, text=True, env=env, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr + done.stdout
    return done.stdout.splitlines()


def test_a_note_typed_just_before_clicking_add_is_kept(project, ui_env):
    with Project.open(project) as p:
        note = p.add_note("Cast", "Elena Marsh", pinned=True)
    lines = run_window(
        """
        from PySide6.QtCore import Qt
        from PySide6.QtTest import QTest
        notes = window.notes
        notes.text.moveCursor(notes.text.textCursor().MoveOperation.End)
        QTest.keyClicks(notes.text, ", harbourmaster")
        QTest.mouseClick(notes.add_button, Qt.MouseButton.LeftButton)  # within the save delay
        print("notes shown:", notes.list.count(), flush=True)
        window.close()
        """,
        ui_env,
        str(project),
        "",
    )
    assert "notes shown: 2" in lines
    check_project(project, [BASE])
    with Project.open(project, readonly=True) as p:
        assert p.note(note.id).text == "Elena Marsh, harbourmaster"
        assert len(p.notes()) == 2


KEEP_A_COPY = """
import sys
from swiftwriter.ui.safekeeping import keep_emergency_copy
print(keep_emergency_copy(sys.argv[1], "doc-1", "Chapter 1", sys.argv[2]))
"""


def test_an_emergency_copy_survives_not_now_and_a_refused_discard(project, ui_env, tmp_path):
    kept = " ".join(["Words a full disk refused."] * 20)
    made = subprocess.run([sys.executable, "-c", KEEP_A_COPY, str(project), kept],
                          capture_output=True, text=True, env=ui_env, check=True)  # fmt: skip
    copy = tmp_path / "data" / "unsaved" / made.stdout.strip().rsplit("/", 1)[-1]
    assert copy.is_file()
    close = "window.close()\n"

    type_and_save = """
        from PySide6.QtTest import QTest
        window.editor.moveCursor(window.editor.textCursor().MoveOperation.End)
        QTest.keyClicks(window.editor, " Typed after Not now.")
        window.actions_by_name["save"].trigger()
        window.close()
        """
    lines = run_window(type_and_save, ui_env, str(project), "Not now")
    assert copy.is_file()  # offered again next time: saving the document kept it
    check_project(project, [BASE + " Typed after Not now."])
    assert any("could not be saved" in line and "-> Not now" in line for line in lines)
    assert not any(line.startswith("no such button") for line in lines), lines
    lines = run_window(close, ui_env, str(project), "Discard…|No")
    assert copy.is_file()
    assert any("for good" in line and "-> No" in line for line in lines)
    check_project(project, [BASE])
    with Project.open(project, readonly=True) as p:
        assert len(p.documents()) == 1

    lines = run_window(close, ui_env, str(project), "Add as a new document")
    assert not copy.exists()
    check_project(project, [BASE, kept])
    lines = run_window(close, ui_env, str(project), "")
    assert not any(line.startswith("asked:") for line in lines)  # offered once added back

"""The welcome screen (New, Open, Open sample project, what the built-in model is for and
which model to add on this machine, recent projects) and the sample project.

The sample is written fresh into the user's data folder each time it is asked for and is not
there yet, so a writer can try the app without any file of their own."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from swiftwriter import application, paths
from swiftwriter.store import Project

SAMPLE_NAME = "The Harbour (sample).swiftwriter"
CHAPTER_TWO = (
    "The letter had been waiting for her at the post office for nine days. The envelope was "
    "thick, cream-coloured, addressed in a hand she did not know, and it smelled faintly of "
    "tar and salt, as everything in Aldermouth eventually did.\n\n"
    "She opened it at the kitchen table, under the window that looked out over the harbour "
    "wall. Inside were three sheets of paper and a key."
)
NOTES = (
    ("Cast", "Elena Marsh: a surveyor, back in Aldermouth after twelve years away.\n"
             "Tom Pender: harbour master, patient, keeps his own counsel.", True),
    ("Setting", "Aldermouth: a fishing town under a headland; the Anchor inn; the harbour "
                "wall patched with quarry stone; winter storms.", True),
    ("Style", "Close third person, past tense, quiet and precise; weather as mood.", False),
)  # fmt: skip


def sample_text() -> str:
    try:
        text = (paths.resources_dir() / "prompts" / "harbour.txt").read_text(encoding="utf-8")
    except OSError:
        text = "Chapter One\n\nThe town of Aldermouth had been built on the assumption that the sea"
    lines = text.strip().splitlines()
    if lines and lines[0].strip().lower().startswith("chapter"):
        lines = lines[1:]
    return "\n".join(lines).strip()


def create_sample_project(folder: Path | None = None) -> Path:
    """Write the sample project (if missing) and return its path."""
    folder = Path(folder) if folder is not None else paths.data_dir() / "samples"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / SAMPLE_NAME
    if path.exists():
        return path
    with Project.create(path, title="The Harbour", author="SwiftWriter sample") as project:
        part = project.add_document("Part One: Return", kind="part")
        project.add_document("Chapter 1: The Wall", sample_text(), parent_id=part.id)
        project.add_document("Chapter 2: The Letter", CHAPTER_TWO, parent_id=part.id)
        project.add_document("Chapter 3", "", parent_id=part.id)
        for title, text, pinned in NOTES:
            project.add_note(title, text, pinned=pinned)
    return path


class WelcomePage(QWidget):
    new_requested = Signal()
    open_requested = Signal()
    sample_requested = Signal()
    recent_requested = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        title = QLabel("SwiftWriter")
        font = QFont(title.font())
        font.setPointSize(font.pointSize() + 12)
        font.setWeight(QFont.Weight.Light)
        title.setFont(font)
        subtitle = QLabel("Write with a local model, faster than plain decoding, token for token.")
        subtitle.setStyleSheet("color: palette(mid);")
        buttons = QHBoxLayout()
        self.new_button = QPushButton("New project…")
        self.open_button = QPushButton("Open project…")
        self.sample_button = QPushButton("Open sample project")
        for b in (self.new_button, self.open_button, self.sample_button):
            b.setMinimumHeight(34)
            buttons.addWidget(b)
        self.new_button.clicked.connect(self.new_requested.emit)
        self.open_button.clicked.connect(self.open_requested.emit)
        self.sample_button.clicked.connect(self.sample_requested.emit)
        # the first thing a writer meets is the tiny model: what it is for, and what to add
        self.guidance = QLabel(application.advice_for_this_machine().welcome_text())
        self.guidance.setWordWrap(True)
        self.recent = QListWidget()
        self.recent.setMaximumHeight(200)
        self.recent.itemActivated.connect(
            lambda item: self.recent_requested.emit(item.data(Qt.ItemDataRole.UserRole))
        )
        column = QVBoxLayout()
        column.addStretch(2)
        column.addWidget(title)
        column.addWidget(subtitle)
        column.addSpacing(18)
        column.addLayout(buttons)
        column.addSpacing(18)
        column.addWidget(self.guidance)
        column.addSpacing(18)
        self.recent_label = QLabel("Recent projects")
        column.addWidget(self.recent_label)
        column.addWidget(self.recent)
        column.addStretch(3)
        outer = QHBoxLayout(self)
        outer.addStretch(1)
        outer.addLayout(column, 3)
        outer.addStretch(1)

    def set_recent(self, recent: list[str]) -> None:
        self.recent.clear()
        for path in recent:
            item = QListWidgetItem(f"{Path(path).stem}    —    {Path(path).parent}")
            item.setData(Qt.ItemDataRole.UserRole, path)
            self.recent.addItem(item)
        self.recent.setVisible(bool(recent))
        self.recent_label.setVisible(bool(recent))

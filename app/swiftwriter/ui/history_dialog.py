"""The history browser: every generation of the project with its stats and settings.

Open shows its document; Compare puts two takes side by side; Insert puts a take's text at the
editor's cursor; Restore snapshot puts back the document as it was just before that generation
(the store keeps the replaced text as a snapshot too, so nothing is lost either way)."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from swiftwriter.store import Generation, Project, ProjectError
from swiftwriter.writing.alternatives import TOOLS as SELECTION_TOOLS
from swiftwriter.writing.baseline import plain_rate, stats_speedup

COLUMNS = ("#", "Document", "Started", "Status", "Tokens", "tok/s", "τ", "Speedup", "Mode")


def mode_of(settings: dict) -> str:
    """The History's Mode column: the selection tool that wrote it, else the take's mode."""
    tool = settings.get("tool")
    if tool:
        return SELECTION_TOOLS.get(tool, (str(tool),))[0]
    return "Precise" if settings.get("sampling", {}).get("greedy", True) else "Creative"


def describe(gen: Generation) -> str:
    s, st = gen.settings or {}, gen.stats or {}
    sampling = s.get("sampling", {})
    lines = [
        f"Generation {gen.id} · {gen.status} · model {gen.model_id}",
        f"Started {gen.started}" + (f", finished {gen.finished}" if gen.finished else ""),
        f"{st.get('tokens', gen.n_tokens):,} tokens, {st.get('tokens_per_s', 0):.1f} tok/s, "
        f"τ {st.get('tau', 0):.2f}, accepted by source {st.get('accepted_by_source', {})}",
    ]
    plain, in_run = plain_rate(st)
    if in_run:
        lines.append(
            f"Plain decoding measured in this run ({st.get('undrafted_passes', 0):,} undrafted "
            f"passes): {plain:.1f} tok/s"
        )
    elif st.get("plain_tokens_per_s"):
        lines.append(
            f"Plain decoding measured at {st.get('plain_context', 0):,} tokens of context: "
            f"{st['plain_tokens_per_s']:.1f} tok/s"
        )
    if s.get("tool"):
        lines.append(
            f"{mode_of(s)} of a selected passage ({s.get('instruction', '')}): alternative "
            f"{s.get('chosen', '?')} of {s.get('alternatives', '?')}, seed {s.get('seed')}, "
            f"in place of {len(s.get('replaced', '')):,} characters"
        )
    if gen.error:
        lines.append(f"Error: {gen.error}")
    lines.append("Sampling: " + json.dumps(sampling, sort_keys=True))
    lines.append("Drafting: " + json.dumps(s.get("drafting", {}), sort_keys=True))
    return "\n".join(lines)


class HistoryDialog(QDialog):
    insert_requested = Signal(str)
    open_requested = Signal(int)
    snapshot_restored = Signal(int)

    def __init__(self, project: Project, parent=None):
        super().__init__(parent)
        self.setWindowTitle("History")
        self.resize(1000, 640)
        self.project = project
        self.generations: list[Generation] = []
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._on_selection)
        self.details = QLabel("")
        self.details.setWordWrap(True)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.left = QPlainTextEdit(readOnly=True)
        self.right = QPlainTextEdit(readOnly=True)
        self.right.hide()
        texts = QSplitter()
        texts.addWidget(self.left)
        texts.addWidget(self.right)
        buttons = self._build_buttons()
        lower = QWidget()
        lower_layout = QVBoxLayout(lower)
        lower_layout.setContentsMargins(0, 0, 0, 0)
        lower_layout.addWidget(self.details)
        lower_layout.addWidget(texts, 1)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(lower)
        split.setSizes([260, 380])
        layout = QVBoxLayout(self)
        layout.addWidget(split, 1)
        layout.addLayout(buttons)
        self.reload()

    def _build_buttons(self) -> QHBoxLayout:
        """What can be done with the selected generations, and Close."""
        buttons = QHBoxLayout()
        self.open_button = QPushButton("Open document")
        self.compare_button = QPushButton("Compare selected two")
        self.insert_button = QPushButton("Insert at cursor")
        self.restore_button = QPushButton("Restore snapshot before it")
        self.context_button = QPushButton("Context given")
        self.context_button.setToolTip("What the model was given for this take, part by part")
        for b in (self.open_button, self.compare_button, self.insert_button, self.restore_button,
                  self.context_button):  # fmt: skip
            buttons.addWidget(b)
        buttons.addStretch(1)
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        buttons.addWidget(close)
        self.open_button.clicked.connect(self.open_selected)
        self.compare_button.clicked.connect(self.compare_selected)
        self.insert_button.clicked.connect(self.insert_selected)
        self.restore_button.clicked.connect(self.restore_selected)
        self.context_button.clicked.connect(self.show_context)
        return buttons

    def reload(self) -> None:
        titles = {d.id: d.title for d in self.project.documents()}
        self.generations = list(reversed(self.project.generations()))  # newest first
        self.table.setRowCount(len(self.generations))
        for row, gen in enumerate(self.generations):
            st = gen.stats or {}
            speed = stats_speedup(st)
            values = (
                str(gen.id),
                titles.get(gen.doc_id, f"(deleted {gen.doc_id})"),
                gen.started[:19].replace("T", " "),
                gen.status,
                f"{st.get('tokens', gen.n_tokens):,}",
                f"{st.get('tokens_per_s', 0):.1f}",
                f"{st.get('tau', 0):.2f}",
                f"×{speed:.2f}" if speed else "–",
                mode_of(gen.settings or {}),
            )
            for col, value in enumerate(values):
                self.table.setItem(row, col, QTableWidgetItem(value))
        self.table.resizeColumnsToContents()
        self._update_buttons()

    def selected(self) -> list[Generation]:
        rows = sorted({i.row() for i in self.table.selectedIndexes()})
        return [self.generations[r] for r in rows]

    def select_rows(self, rows: list[int]) -> None:
        self.table.clearSelection()
        mode = self.table.selectionMode()
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.MultiSelection)
        for r in rows:
            self.table.selectRow(r)
        self.table.setSelectionMode(mode)

    def _update_buttons(self) -> None:
        chosen = self.selected()
        one = len(chosen) == 1
        writable = not self.project.readonly
        self.open_button.setEnabled(one)
        self.insert_button.setEnabled(one and writable)
        self.restore_button.setEnabled(one and writable and chosen[0].snapshot_id is not None)
        self.compare_button.setEnabled(len(chosen) == 2)
        self.context_button.setEnabled(
            one and bool((chosen[0].settings or {}).get("context_given"))
        )

    def _on_selection(self) -> None:
        chosen = self.selected()
        self._update_buttons()
        self.right.hide()
        if not chosen:
            self.details.setText("")
            self.left.clear()
            return
        gen = self.project.generation(chosen[0].id, with_tokens=False)
        self.details.setText(describe(gen))
        self.left.setPlainText(gen.text)

    def open_selected(self) -> None:
        chosen = self.selected()
        if chosen:
            self.open_requested.emit(chosen[0].doc_id)

    def compare_selected(self) -> tuple[str, str] | None:
        chosen = self.selected()
        if len(chosen) != 2:
            return None
        a, b = (self.project.generation(g.id, with_tokens=False) for g in chosen)
        self.details.setText(f"Left: generation {a.id} · right: generation {b.id}")
        self.left.setPlainText(a.text)
        self.right.setPlainText(b.text)
        self.right.show()
        return a.text, b.text

    def show_context(self) -> str:
        """The context the selected take was given (kept with it since the story context)."""
        chosen = self.selected()
        text = (chosen[0].settings or {}).get("context_given", "") if chosen else ""
        if text:
            self.details.setText(f"What the model was given for generation {chosen[0].id}:")
            self.left.setPlainText(text)
            self.right.hide()
        return text

    def insert_selected(self) -> None:
        chosen = self.selected()
        if chosen:
            self.insert_requested.emit(self.project.generation(chosen[0].id).text)

    def restore_selected(self) -> bool:
        chosen = self.selected()
        if not chosen or chosen[0].snapshot_id is None:
            return False
        try:
            doc = self.project.restore_snapshot(chosen[0].snapshot_id)
        except ProjectError as exc:
            self.details.setText(str(exc))
            return False
        self.snapshot_restored.emit(doc.id)
        self.details.setText(f"Restored “{doc.title}” as it was before generation {chosen[0].id}")
        return True

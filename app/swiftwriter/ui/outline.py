"""The Outline (View > Outline): every document in one table (title, kind, synopsis, words,
status), edited in place. Each change goes to the store at once and the project tree follows.
A document's words include those of the documents below it: a chapter counts its scenes."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QDialog, QTableWidget, QTableWidgetItem, QVBoxLayout

from swiftwriter.store import ProjectError, planning
from swiftwriter.store.records import DOCUMENT_KINDS

COLUMNS = ("Title", "Kind", "Synopsis", "Words", "Status")
TITLE, KIND, SYNOPSIS, WORDS, STATUS = range(5)
ID_ROLE = Qt.ItemDataRole.UserRole


class OutlineDialog(QDialog):
    project_bound = True  # closed with its project (ProjectController.close_project)

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.project = window.project
        self.setWindowTitle("Outline")
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.horizontalHeader().setStretchLastSection(False)
        self.table.horizontalHeader().setSectionResizeMode(
            SYNOPSIS, self.table.horizontalHeader().ResizeMode.Stretch
        )
        self.table.verticalHeader().hide()
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        self._filling = False
        self.table.itemChanged.connect(self._on_item_changed)
        self.table.cellDoubleClicked.connect(self._open_row)
        self.resize(900, 520)
        self.fill()

    def fill(self) -> None:
        project = self.project
        if project is not self.window.project:
            return  # its project is closed (the window closes this dialog with it)
        self._filling = True
        try:
            docs = project.documents() if project is not None else []
            status = planning.statuses(project) if project is not None else {}
            readonly = project is None or project.readonly
            words_of = planning.words_with_what_is_below(docs)
            self.table.setRowCount(len(docs))
            for row, doc in enumerate(docs):
                title = QTableWidgetItem(doc.title)
                title.setData(ID_ROLE, doc.id)
                title.setData(Qt.ItemDataRole.ToolTipRole, f"Level {doc.depth + 1}")
                self.table.setItem(row, TITLE, title)
                self.table.setItem(row, SYNOPSIS, QTableWidgetItem(doc.synopsis or ""))
                words = QTableWidgetItem(f"{words_of[doc.id]:,}")
                words.setFlags(words.flags() & ~Qt.ItemFlag.ItemIsEditable)
                words.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(row, WORDS, words)
                self.table.setCellWidget(
                    row, KIND, self._combo(DOCUMENT_KINDS, doc.kind, doc.id, self._set_kind)
                )
                self.table.setCellWidget(
                    row,
                    STATUS,
                    self._combo(
                        planning.STATUSES, status.get(doc.id, ""), doc.id, self._set_status
                    ),
                )
                title.setText(("    " * doc.depth) + doc.title)
                for column in (KIND, STATUS):
                    self.table.cellWidget(row, column).setEnabled(not readonly)
            self.table.setEditTriggers(
                QTableWidget.EditTrigger.NoEditTriggers
                if readonly
                else QTableWidget.EditTrigger.DoubleClicked
                | QTableWidget.EditTrigger.EditKeyPressed
                | QTableWidget.EditTrigger.AnyKeyPressed
            )
            self.table.resizeColumnToContents(TITLE)
        finally:
            self._filling = False

    def _combo(self, choices, current: str, doc_id: int, slot) -> QComboBox:
        box = QComboBox()
        box.addItems([c or "–" for c in choices])
        box.setCurrentIndex(list(choices).index(current) if current in choices else 0)
        box.currentIndexChanged.connect(lambda i: slot(doc_id, choices[i]))
        return box

    def doc_id(self, row: int) -> int:
        return self.table.item(row, TITLE).data(ID_ROLE)

    def _current(self) -> bool:
        return self.project is not None and self.project is self.window.project

    def _set_kind(self, doc_id: int, kind: str) -> None:
        if self._current():
            self.window.tree.set_kind(doc_id, kind)

    def _set_status(self, doc_id: int, status: str) -> None:
        if self._current():
            planning.set_status(self.project, doc_id, status)

    def _on_item_changed(self, item: QTableWidgetItem) -> None:
        if self._filling or not self._current():
            return
        project, doc_id = self.project, self.doc_id(item.row())
        try:
            if item.column() == TITLE:
                project.rename(doc_id, item.text().strip())
                self.window.tree.reload(select=self.window.tree.current_id())
            elif item.column() == SYNOPSIS:
                project.set_synopsis(doc_id, item.text())
        except ProjectError as exc:
            self.window.statusBar().showMessage(str(exc), 8000)
        self.fill()

    def _open_row(self, row: int, column: int) -> None:
        if column == WORDS:  # double-clicking the count opens the document
            self.window.tree.select(self.doc_id(row))

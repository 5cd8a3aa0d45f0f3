"""Find in project (Ctrl+Shift+F): every match of a phrase in every document, listed with its
document and a snippet, then the lorebook entries holding it; choosing one opens the document
with the match selected (or the lorebook at the entry)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
)

from swiftwriter.store.search import Match, find_in_documents, find_in_lore

MATCH_ROLE = Qt.ItemDataRole.UserRole


class ProjectSearchDialog(QDialog):
    """Non-modal: the writer keeps it open and walks the results while editing; closed with
    its project."""

    project_bound = True

    def __init__(self, window, needle: str = "", case: bool = False, whole: bool = False):
        super().__init__(window)
        self.window = window
        self.setWindowTitle("Find in project")
        self.query = QLineEdit(needle, placeholderText="Find in every document")
        self.case = QCheckBox("Match case", checked=case)
        self.whole = QCheckBox("Whole words", checked=whole)
        search = QPushButton("Search")
        self.results = QListWidget()
        self.summary = QLabel("")
        row = QHBoxLayout()
        for widget in (self.query, self.case, self.whole, search):
            row.addWidget(widget)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.results, 1)
        layout.addWidget(self.summary)
        self.query.returnPressed.connect(self.search)
        search.clicked.connect(self.search)
        self.results.itemActivated.connect(self._open)
        self.resize(640, 420)

    def search(self) -> list[Match]:
        documents = self.window.searchable_documents()
        options = (self.query.text(), self.case.isChecked(), self.whole.isChecked())
        matches = find_in_documents(documents, *options)
        project = self.window.project
        lore = find_in_lore(project.lore_entries(), *options) if project is not None else []
        self.results.clear()
        for match in matches + lore:
            where = "Lorebook › " if match.lore_id is not None else ""
            item = QListWidgetItem(f"{where}{match.title}: {match.snippet}")
            item.setData(MATCH_ROLE, match)
            self.results.addItem(item)
        docs = len({m.doc_id for m in matches})
        said = f"{len(matches)} matches in {docs} documents" if matches else ""
        if lore:
            said += (
                (", and " if said else "")
                + f"{len(lore)} lorebook "
                + ("entry" if len(lore) == 1 else "entries")
            )
        self.summary.setText(said or "Not found")
        return matches + lore

    def _open(self, item: QListWidgetItem) -> None:
        self.window.open_match(item.data(MATCH_ROLE))

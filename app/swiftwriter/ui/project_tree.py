"""The project's document tree: add, rename in place, reorder by drag, delete to the trash.

The tree is only a view of the store: every change goes to the project first and the tree is
rebuilt from it, so the two never disagree. Delete moves a document to the store's trash, which
is what makes Undo delete possible."""

from __future__ import annotations

import contextlib

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QMenu,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from swiftwriter.store import Project, ProjectError
from swiftwriter.store.records import DOCUMENT_KINDS

ID_ROLE = Qt.ItemDataRole.UserRole
# What "Add inside" makes under a document of each kind: a part holds chapters, a chapter scenes.
CHILD_KIND = {"part": "chapter", "chapter": "scene", "scene": "scene"}
# Deeper documents (a hostile file nests thousands) hang beside their parent at this level:
# Qt and the walks over items recurse per level.
MAX_DEPTH = 32


def tree_parent(items: dict, doc) -> QTreeWidgetItem | None:
    """The item a document hangs under in a tree widget (None: the top level)."""
    parent = items.get(doc.parent_id)
    return parent.parent() if parent is not None and doc.depth >= MAX_DEPTH else parent


def new_kind(parent_kind: str | None, sibling_kind: str | None) -> str:
    """The kind of a new document: a sibling's own kind, or the child kind of its parent."""
    if sibling_kind is not None:
        return sibling_kind
    if parent_kind is None:
        return "chapter"
    return CHILD_KIND.get(parent_kind, parent_kind)


class DocumentTree(QTreeWidget):
    """A QTreeWidget whose drops become `Project.move` calls."""

    moved = Signal(int, object, int)  # doc id, new parent id (or None), position

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setColumnCount(2)
        self.setHeaderLabels(["Title", "Kind"])
        self.setHeaderHidden(True)
        self.setDragDropMode(QAbstractItemView.DragDropMode.InternalMove)
        self.setDefaultDropAction(Qt.DropAction.MoveAction)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(
            QAbstractItemView.EditTrigger.EditKeyPressed
            | QAbstractItemView.EditTrigger.SelectedClicked
        )

    def dropEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        item = self.currentItem()
        super().dropEvent(event)
        if item is None:
            return
        parent = item.parent()
        position = parent.indexOfChild(item) if parent else self.indexOfTopLevelItem(item)
        parent_id = parent.data(0, ID_ROLE) if parent else None
        doc_id = item.data(0, ID_ROLE)
        # After the drag has finished with these items: the store moves, the tree is rebuilt.
        QTimer.singleShot(0, lambda: self.moved.emit(doc_id, parent_id, position))


class ProjectTree(QWidget):
    """The tree plus its small toolbar; emits `document_selected` with a document id."""

    document_selected = Signal(int)
    deleted = Signal(int, str)  # doc id, title: the window offers Undo
    changed = Signal()
    synopsis_requested = Signal(int)  # doc id: the window opens its synopsis

    def __init__(self, parent=None):
        super().__init__(parent)
        self.project: Project | None = None
        self.tree = DocumentTree(self)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._menu)
        self.tree.currentItemChanged.connect(self._on_current)
        self.tree.itemChanged.connect(self._on_item_changed)
        self.tree.moved.connect(self.move)
        bar = QHBoxLayout()
        bar.setContentsMargins(4, 2, 4, 2)
        for text, tip, slot in (
            ("+", "Add a document after this one", lambda: self.add_document()),
            ("↳", "Add a document inside this one", lambda: self.add_document(child=True)),
            ("−", "Move this document to the trash", lambda: self.delete_current()),
        ):
            button = QToolButton(text=text, toolTip=tip)
            button.setAutoRaise(True)
            button.clicked.connect(slot)
            bar.addWidget(button)
        bar.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(bar)
        layout.addWidget(self.tree)
        self._rebuilding = False
        self.confirm = lambda title, text: True  # the window replaces it with a real question

    # -- building ---------------------------------------------------------------------------
    def set_project(self, project: Project | None) -> None:
        self.project = project
        self.reload()
        editable = project is not None and not project.readonly
        self.tree.setDragEnabled(editable)
        self.tree.setAcceptDrops(editable)

    def reload(self, select: int | None = None) -> None:
        select = select if select is not None else self.current_id()
        self._rebuilding = True
        try:
            self.tree.clear()
            if self.project is None:
                return
            items: dict[int, QTreeWidgetItem] = {}
            first_with_text = None
            flags = (
                Qt.ItemFlag.ItemIsSelectable
                | Qt.ItemFlag.ItemIsEnabled
                | Qt.ItemFlag.ItemIsDragEnabled
                | Qt.ItemFlag.ItemIsDropEnabled
            )
            if not self.project.readonly:
                flags |= Qt.ItemFlag.ItemIsEditable
            for doc in self.project.documents():
                parent = tree_parent(items, doc)
                item = QTreeWidgetItem([doc.title, doc.kind])
                item.setForeground(1, self.palette().placeholderText())
                item.setData(0, ID_ROLE, doc.id)
                item.setToolTip(0, f"{doc.kind} · {len(doc.text.split())} words")
                item.setFlags(flags)
                (parent.addChild(item) if parent else self.tree.addTopLevelItem(item))
                items[doc.id] = item
                if first_with_text is None and doc.text.strip():
                    first_with_text = item
            self.tree.expandAll()
            self.tree.resizeColumnToContents(1)
            self.tree.header().setStretchLastSection(False)
            self.tree.header().setSectionResizeMode(0, self.tree.header().ResizeMode.Stretch)
            target = items.get(select) if select is not None else None
            if target is None and items:  # open on the first page with words, not a part title
                target = first_with_text or next(iter(items.values()))
            if target is not None:
                self.tree.setCurrentItem(target)
        finally:
            self._rebuilding = False
        current = self.current_id()
        if current is not None:
            self.document_selected.emit(current)

    def current_id(self) -> int | None:
        item = self.tree.currentItem()
        return item.data(0, ID_ROLE) if item is not None else None

    def select(self, doc_id: int) -> None:
        self.reload(select=doc_id)

    def ids_in_order(self) -> list[int]:
        out: list[int] = []
        stack = [self.tree.topLevelItem(i) for i in reversed(range(self.tree.topLevelItemCount()))]
        while stack:
            item = stack.pop()
            out.append(item.data(0, ID_ROLE))
            stack.extend(item.child(i) for i in reversed(range(item.childCount())))
        return out

    # -- changes ----------------------------------------------------------------------------
    def add_document(self, title: str | None = None, child: bool = False) -> int | None:
        """After the current document (the same kind), or inside it (a chapter's child is a
        scene, a part's a chapter)."""
        if self.project is None or self.project.readonly:
            return None
        current = self.current_id()
        parent_id, position, kind = None, None, "chapter"
        if current is not None:
            doc = self.project.document(current)
            if child:
                parent_id, kind = doc.id, new_kind(doc.kind, None)
            else:
                parent_id, position, kind = doc.parent_id, doc.position + 1, doc.kind
        title = title or f"New {kind}"
        doc = self.project.add_document(title, parent_id=parent_id, position=position, kind=kind)
        self.reload(select=doc.id)
        self.changed.emit()
        item = self.tree.currentItem()
        if item is not None and self.isVisible():
            self.tree.editItem(item)
        return doc.id

    def rename(self, doc_id: int, title: str) -> None:
        if self.project is None:
            return
        with contextlib.suppress(ProjectError):  # an empty title: the old one comes back
            self.project.rename(doc_id, title)
        self.reload(select=doc_id)
        self.changed.emit()

    def set_kind(self, doc_id: int, kind: str) -> None:
        if self.project is None:
            return
        self.project.set_kind(doc_id, kind)
        self.reload(select=doc_id)
        self.changed.emit()

    def move(self, doc_id: int, parent_id: int | None, position: int) -> None:
        if self.project is None:
            return
        with contextlib.suppress(ProjectError):  # the tree is rebuilt from the store anyway
            self.project.move(doc_id, parent_id, position)
        self.reload(select=doc_id)
        self.changed.emit()

    def delete_current(self) -> None:
        doc_id = self.current_id()
        if doc_id is None or self.project is None or self.project.readonly:
            return
        doc = self.project.document(doc_id)
        below = sum(1 for d in self.project.documents() if d.parent_id == doc_id)
        extra = f" and the {below} document(s) inside it" if below else ""
        if not self.confirm("Delete document", f"Move “{doc.title}”{extra} to the trash?"):
            return
        self.project.delete(doc_id)
        self.reload()
        self.deleted.emit(doc_id, doc.title)
        self.changed.emit()

    def undelete(self, doc_id: int) -> None:
        if self.project is None:
            return
        self.project.undelete(doc_id)
        self.reload(select=doc_id)
        self.changed.emit()

    # -- signals ----------------------------------------------------------------------------
    def _on_current(self, current, _previous) -> None:
        if not self._rebuilding and current is not None:
            self.document_selected.emit(current.data(0, ID_ROLE))

    def _on_item_changed(self, item: QTreeWidgetItem, column: int) -> None:
        if self._rebuilding or self.project is None:
            return
        doc_id = item.data(0, ID_ROLE)
        if column == 1:  # the kind typed in: one of the kinds, else the old one comes back
            kind = item.text(1).strip().lower()
            if kind in DOCUMENT_KINDS:
                QTimer.singleShot(0, lambda: self.set_kind(doc_id, kind))
            else:
                QTimer.singleShot(0, lambda: self.reload(select=doc_id))
            return
        title = item.text(0)
        if self.project.document(doc_id).title != title.strip():
            QTimer.singleShot(0, lambda: self.rename(doc_id, title))  # not inside this signal

    def _menu(self, pos) -> None:
        if self.project is None or self.project.readonly:
            return
        menu = QMenu(self)
        menu.addAction("Add document", lambda: self.add_document())
        menu.addAction("Add document inside", lambda: self.add_document(child=True))
        item = self.tree.itemAt(pos)
        if item is not None:
            menu.addAction("Rename", lambda: self.tree.editItem(item))
            kinds = menu.addMenu("Kind")
            doc_id = item.data(0, ID_ROLE)
            for kind in DOCUMENT_KINDS:
                action = kinds.addAction(kind.capitalize(), lambda k=kind: self.set_kind(doc_id, k))
                action.setCheckable(True)
                action.setChecked(item.text(1) == kind)
            menu.addAction("Synopsis…", lambda: self.synopsis_requested.emit(self.current_id()))
            menu.addSeparator()
            menu.addAction("Delete…", self.delete_current)
        menu.exec(self.tree.viewport().mapToGlobal(pos))

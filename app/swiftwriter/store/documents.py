"""The writer's material in a project: the document tree (with a trash), snapshots and notes.

Mixed into Project, which supplies the connection, the lock and `_write` (one transaction per
change). Positions among siblings are kept dense (0, 1, 2, ...) so moves stay simple."""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections import defaultdict

from swiftwriter.store.records import (
    DOCUMENT_KINDS,
    Document,
    Note,
    ProjectError,
    Snapshot,
    check_id,
    check_text,
    check_title,
    now,
)
from swiftwriter.store.texts import as_text

log = logging.getLogger(__name__)
_said: set = set()  # cycles already logged: once per file and cycle


def tree_order(rows: list[dict], make, where: str = "") -> list[Document]:
    """Rows as documents in depth-first order, without recursion (a hostile file may nest
    thousands deep). A parent cycle (a -> b -> a) is broken by showing its lowest id at the
    top level, said once in the log."""
    children = defaultdict(list)
    ids = {r["id"] for r in rows}
    for r in rows:
        children[r["parent_id"] if r["parent_id"] in ids else None].append(r)
    for siblings in children.values():
        siblings.sort(key=lambda r: (r["position"], r["id"]), reverse=True)
    out: list[Document] = []
    seen: set[int] = set()
    stack = [(r, 0) for r in children.get(None, ())]
    broken = []
    while True:
        while stack:
            r, depth = stack.pop()
            if r["id"] in seen:
                continue
            seen.add(r["id"])
            out.append(make(r, depth))
            stack.extend((c, depth + 1) for c in children.get(r["id"], ()))
        left = [r for r in rows if r["id"] not in seen]
        if not left:
            break
        by_id = {r["id"]: r for r in left}  # only a cycle keeps rows out of reach: find it
        at, path = min(by_id), []
        while at not in path:
            path.append(at)
            at = by_id[at]["parent_id"]
        top = by_id[min(path[path.index(at) :])]
        broken.append(top["id"])
        stack.append(({**top, "parent_id": None}, 0))
    if broken and (where, tuple(broken)) not in _said:
        _said.add((where, tuple(broken)))
        log.warning(
            "%s: documents %s sit in a parent cycle; shown at the top level",
            where, ", ".join(map(str, broken)),
        )  # fmt: skip
    return out


def _locked(method):
    """Serialise access: the app streams from a worker thread while the window reads."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._mutex:
            if self.db is None:
                raise ProjectError(f"The project {self.path.name} is closed")
            try:
                return method(self, *args, **kwargs)
            except sqlite3.DatabaseError as exc:
                raise ProjectError(
                    f"Could not read {self.path.name}: the file is damaged ({exc})"
                ) from exc

    return wrapper


class DocumentsMixin:
    """Documents, snapshots and notes (mixed into Project)."""

    # -- documents --------------------------------------------------------------------------
    _DOC_COLUMNS = "id, parent_id, kind, title, text, position, created, modified, synopsis"
    # the same without the texts, for the tree alone: a document may hold hundreds of megabytes
    _TREE_COLUMNS = (
        "id, parent_id, kind, title, '' AS text, position, created, modified, '' AS synopsis"
    )

    @_locked
    def documents(self, texts: bool = True) -> list[Document]:
        """All documents outside the trash, in depth-first tree order; without `texts`, their
        text and synopsis are left empty (nothing of them is read: `excerpt` reads them)."""
        columns = self._DOC_COLUMNS if texts else self._TREE_COLUMNS
        rows = list(self.db.query(f"SELECT {columns} FROM documents WHERE deleted IS NULL"))
        return tree_order(rows, self._doc, self.path.name)

    @_locked
    def document(self, doc_id: int, texts: bool = True) -> Document:
        """One document; without `texts`, its text and synopsis are left empty (not read)."""
        row = self._doc_row(doc_id, texts=texts)
        # its ancestors in one query (a walk of one query a parent took seconds on a hostile
        # file's chain of thousands), each id listed once: a cycle stops where it closes
        depth, parent, path = self.db.execute(
            """WITH RECURSIVE up(id, parent_id, depth, path) AS (
                 SELECT id, parent_id, 0, ',' || id || ',' FROM documents WHERE id = ?
                 UNION ALL
                 SELECT d.id, d.parent_id, up.depth + 1, up.path || d.id || ','
                 FROM documents d JOIN up ON d.id = up.parent_id
                 WHERE instr(up.path, ',' || d.id || ',') = 0)
               SELECT depth, parent_id, path FROM up ORDER BY depth DESC LIMIT 1""",
            [doc_id],
        ).fetchone()
        if parent is not None and f",{parent}," in path:  # a parent cycle planted in the file
            return next(d for d in self.documents(texts) if d.id == doc_id)
        return self._doc(row, depth)

    def add_document(
        self,
        title: str,
        text: str = "",
        parent_id: int | None = None,
        kind: str = "chapter",
        position: int | None = None,
    ) -> Document:
        title, text = check_title(title), check_text(text, "document text")
        if kind not in DOCUMENT_KINDS:
            raise ProjectError(f"Unknown document kind '{kind}' (use {', '.join(DOCUMENT_KINDS)})")
        with self._write() as db:
            if parent_id is not None:
                self._doc_row(parent_id)
            siblings = self._sibling_ids(parent_id)
            position = self._check_position(position, len(siblings))
            stamp = now()
            new_id = (
                db["documents"]
                .insert(
                    {
                        "parent_id": parent_id,
                        "kind": kind,
                        "title": title,
                        "text": text,
                        "position": position,
                        "created": stamp,
                        "modified": stamp,
                    }
                )
                .last_pk
            )
            siblings.insert(position, new_id)
            self._renumber(siblings)
        return self.document(new_id)

    def update_text(self, doc_id: int, text: str) -> None:
        check_text(text, "document text")
        with self._write() as db:
            self._doc_row(doc_id)
            db.execute(
                "UPDATE documents SET text = ?, modified = ? WHERE id = ?", [text, now(), doc_id]
            )
        log.debug("saved document %d of %s (%d characters)", doc_id, self.path.name, len(text))

    def set_kind(self, doc_id: int, kind: str) -> None:
        """Part, chapter, scene, section or document: the heading level it exports as."""
        if kind not in DOCUMENT_KINDS:
            raise ProjectError(f"Unknown document kind '{kind}' (use {', '.join(DOCUMENT_KINDS)})")
        with self._write() as db:
            self._doc_row(doc_id)
            db.execute(
                "UPDATE documents SET kind = ?, modified = ? WHERE id = ?", [kind, now(), doc_id]
            )

    def set_synopsis(self, doc_id: int, synopsis: str) -> None:
        """A document's synopsis (the story context uses it where the text does not fit)."""
        synopsis = check_text(synopsis, "synopsis")
        with self._write() as db:
            self._doc_row(doc_id)
            db.execute("UPDATE documents SET synopsis = ? WHERE id = ?", [synopsis, doc_id])

    def rename(self, doc_id: int, title: str) -> None:
        title = check_title(title)
        with self._write() as db:
            self._doc_row(doc_id)
            db.execute(
                "UPDATE documents SET title = ?, modified = ? WHERE id = ?", [title, now(), doc_id]
            )

    def move(self, doc_id: int, parent_id: int | None, position: int | None = None) -> None:
        """Put a document (with everything below it) under `parent_id` at `position`."""
        with self._write() as db:
            row = self._doc_row(doc_id)
            if parent_id is not None:
                self._doc_row(parent_id)
                if parent_id == doc_id or parent_id in self._descendants(doc_id):
                    raise ProjectError("A document cannot be moved inside itself")
            old = [i for i in self._sibling_ids(row["parent_id"]) if i != doc_id]
            new = old if parent_id == row["parent_id"] else self._sibling_ids(parent_id)
            position = self._check_position(position, len(new))
            db.execute("UPDATE documents SET parent_id = ? WHERE id = ?", [parent_id, doc_id])
            new.insert(position, doc_id)
            self._renumber(new)
            if parent_id != row["parent_id"]:
                self._renumber(old)

    def delete(self, doc_id: int) -> None:
        """Move a document and everything below it to the trash (nothing is erased)."""
        with self._write() as db:
            row = self._doc_row(doc_id)
            stamp = now()
            for i in [doc_id, *self._descendants(doc_id)]:
                db.execute("UPDATE documents SET deleted = ? WHERE id = ?", [stamp, i])
            self._renumber(self._sibling_ids(row["parent_id"]))

    @_locked
    def trash(self) -> list[Document]:
        """Documents deleted as a whole (their children come back with them)."""
        rows = self.db.query(
            f"SELECT {self._DOC_COLUMNS} FROM documents d WHERE deleted IS NOT NULL AND NOT "
            "EXISTS (SELECT 1 FROM documents p WHERE p.id = d.parent_id AND p.deleted = d.deleted)"
            " ORDER BY deleted DESC, id"
        )
        return [self._doc(r, 0) for r in rows]

    def undelete(self, doc_id: int) -> Document:
        with self._write() as db:
            row = self._doc_row(doc_id, deleted=True)
            stamp = db.execute("SELECT deleted FROM documents WHERE id = ?", [doc_id]).fetchone()[0]
            if stamp is None:
                raise ProjectError(f"Document {doc_id} is not in the trash")
            parent = row["parent_id"]
            if parent is not None and not self._exists(parent):
                parent = None
            for i in [doc_id, *self._descendants(doc_id, deleted=stamp)]:
                db.execute("UPDATE documents SET deleted = NULL WHERE id = ?", [i])
            siblings = [i for i in self._sibling_ids(parent) if i != doc_id] + [doc_id]
            db.execute("UPDATE documents SET parent_id = ? WHERE id = ?", [parent, doc_id])
            self._renumber(siblings)
        return self.document(doc_id)

    # -- snapshots --------------------------------------------------------------------------
    def snapshot(self, doc_id: int, reason: str = "manual") -> int:
        """Keep the document's current version; an unchanged document reuses its last one."""
        reason = check_text(reason, "snapshot reason")[:200]
        with self._write() as db:
            row = self._doc_row(doc_id)
            last = db.execute(
                "SELECT id, title, text FROM snapshots WHERE doc_id = ? ORDER BY id DESC LIMIT 1",
                [doc_id],
            ).fetchone()
            if last is not None and last[1] == row["title"] and last[2] == row["text"]:
                return last[0]
            return (
                db["snapshots"]
                .insert(
                    {
                        "doc_id": doc_id,
                        "title": row["title"],
                        "text": row["text"],
                        "reason": reason,
                        "created": now(),
                    }
                )
                .last_pk
            )

    @_locked
    def snapshots(self, doc_id: int) -> list[Snapshot]:
        """Versions of a document, newest first."""
        check_id(doc_id)
        rows = self.db.query(
            "SELECT id, doc_id, title, text, reason, created FROM snapshots WHERE doc_id = ? "
            "ORDER BY id DESC",
            [doc_id],
        )
        return [Snapshot(**r) for r in rows]

    def restore_snapshot(self, snapshot_id: int) -> Document:
        """Put a snapshot's text back; the text it replaces is kept as a snapshot first."""
        check_id(snapshot_id, "snapshot")
        with self._write() as db:
            row = db.execute(
                "SELECT doc_id, text FROM snapshots WHERE id = ?", [snapshot_id]
            ).fetchone()
            if row is None:
                raise ProjectError(f"No snapshot with id {snapshot_id} in this project")
            doc_id, text = row
            self.snapshot(doc_id, reason=f"before restoring snapshot {snapshot_id}")
            db.execute(
                "UPDATE documents SET text = ?, modified = ? WHERE id = ?", [text, now(), doc_id]
            )
        return self.document(doc_id)

    # -- notes ------------------------------------------------------------------------------
    _NOTE_COLUMNS = "id, title, text, pinned, position, created, modified"
    _NOTE_TITLES = "id, title, '' AS text, pinned, position, created, modified"

    @_locked
    def notes(self, texts: bool = True) -> list[Note]:
        """All notes in order; without `texts`, their text is left empty (not read)."""
        columns = self._NOTE_COLUMNS if texts else self._NOTE_TITLES
        rows = self.db.query(f"SELECT {columns} FROM notes ORDER BY position, id")
        return [self._note(r) for r in rows]

    def pinned_notes(self, texts: bool = True) -> list[Note]:
        """Notes that go into every prompt (story bible, outline, style)."""
        return [n for n in self.notes(texts) if n.pinned]

    @_locked
    def note(self, note_id: int) -> Note:
        check_id(note_id, "note")
        row = next(
            self.db.query(f"SELECT {self._NOTE_COLUMNS} FROM notes WHERE id = ?", [note_id]), None
        )
        if row is None:
            raise ProjectError(f"No note with id {note_id} in this project")
        return self._note(row)

    def add_note(self, title: str, text: str = "", pinned: bool = False) -> Note:
        title, text = check_title(title, "note"), check_text(text, "note text")
        with self._write() as db:
            position = db.execute("SELECT COALESCE(MAX(position) + 1, 0) FROM notes").fetchone()[0]
            stamp = now()
            note_id = (
                db["notes"]
                .insert(
                    {
                        "title": title,
                        "text": text,
                        "pinned": int(bool(pinned)),
                        "position": position,
                        "created": stamp,
                        "modified": stamp,
                    }
                )
                .last_pk
            )
        return self.note(note_id)

    def update_note(
        self,
        note_id: int,
        title: str | None = None,
        text: str | None = None,
        pinned: bool | None = None,
    ) -> Note:
        changes: dict = {"modified": now()}
        if title is not None:
            changes["title"] = check_title(title, "note")
        if text is not None:
            changes["text"] = check_text(text, "note text")
        if pinned is not None:
            changes["pinned"] = int(bool(pinned))
        with self._write() as db:
            self.note(note_id)
            db["notes"].update(note_id, changes)
        return self.note(note_id)

    def delete_note(self, note_id: int) -> None:
        with self._write() as db:
            self.note(note_id)
            db.execute("DELETE FROM notes WHERE id = ?", [note_id])

    # -- pieces -----------------------------------------------------------------------------
    def _doc(self, row: dict, depth: int) -> Document:
        def name(what: str = "document") -> str:
            return f"{self.path.name}: {what} {row['id']} '{row['title']}'"

        return Document(
            id=row["id"],
            parent_id=row["parent_id"],
            kind=row["kind"],
            title=row["title"],
            text=as_text(row["text"], name),
            position=row["position"],
            depth=depth,
            created=row["created"] or "",
            modified=row["modified"] or "",
            synopsis=as_text(row.get("synopsis"), lambda: name("the synopsis of document")),
        )

    def _note(self, row: dict) -> Note:
        text = as_text(row["text"], lambda: f"{self.path.name}: note {row['id']} '{row['title']}'")
        return Note(
            **{**row, "text": text, "pinned": bool(row["pinned"]), "created": row["created"] or ""}
        )

    def _doc_row(self, doc_id, deleted: bool = False, texts: bool = True) -> dict:
        check_id(doc_id)
        columns = self._DOC_COLUMNS if texts else self._TREE_COLUMNS
        row = next(
            self.db.query(f"SELECT {columns}, deleted FROM documents WHERE id = ?", [doc_id]),
            None,
        )
        if row is None or (row.pop("deleted") is not None and not deleted):
            raise ProjectError(f"No document with id {doc_id} in this project")
        return row

    def _exists(self, doc_id: int) -> bool:
        return bool(
            self.db.execute(
                "SELECT 1 FROM documents WHERE id = ? AND deleted IS NULL", [doc_id]
            ).fetchone()
        )

    def _sibling_ids(self, parent_id: int | None) -> list[int]:
        rows = self.db.execute(
            "SELECT id FROM documents WHERE parent_id IS ? AND deleted IS NULL "
            "ORDER BY position, id",
            [parent_id],
        )
        return [r[0] for r in rows]

    def _descendants(self, doc_id: int, deleted: str | None = None) -> list[int]:
        """Ids below a document: live ones, or those trashed at the `deleted` time stamp."""
        rows = self.db.execute(
            "WITH RECURSIVE below(id) AS (SELECT id FROM documents WHERE parent_id = ? "
            "UNION SELECT d.id FROM documents d JOIN below b ON d.parent_id = b.id) "
            "SELECT d.id FROM below b JOIN documents d ON d.id = b.id WHERE d.deleted IS ?",
            [doc_id, deleted],
        )
        return [r[0] for r in rows]

    def _renumber(self, ids: list[int]) -> None:
        for position, i in enumerate(ids):
            self.db.execute(
                "UPDATE documents SET position = ? WHERE id = ? AND position IS NOT ?",
                [position, i, position],
            )

    @staticmethod
    def _check_position(position, count: int) -> int:
        if position is None:
            return count
        if isinstance(position, bool) or not isinstance(position, int):
            raise ProjectError(f"A position must be a whole number, not {position!r}")
        if not 0 <= position <= count:
            raise ProjectError(f"Position {position} is out of range: use 0 to {count}")
        return position

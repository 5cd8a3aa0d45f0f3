"""Bounded reads of texts that may be very long (a document, its synopsis, a note, the project's
memory): the end or the beginning of the stored value, read from the file with SQLite's
incremental blob reads, so that a take on a project holding a 200 MB chapter reads the few
kilobytes its context can use and never the rest."""

from __future__ import annotations

from collections.abc import Callable

from swiftwriter.store.documents import _locked
from swiftwriter.store.records import ProjectError
from swiftwriter.store.texts import Excerpt, after_cut, as_text, decoded, string_excerpt

# where each kind of text lives: (table, column)
PLACES = {
    "document": ("documents", "text"),
    "synopsis": ("documents", "synopsis"),
    "note": ("notes", "text"),
    "memory": ("meta", "value"),
}


class ExcerptsMixin:
    """Bounded reads of stored texts (mixed into Project)."""

    @_locked
    def excerpt(
        self, kind: str, number: int = 0, limit: int = 1 << 20, end: bool = True
    ) -> Excerpt:
        """The last (`end`) or first whole characters within `limit` bytes of a stored text:
        `kind` is document, synopsis, note (`number` its id) or memory. Only those bytes are
        read. A document or note that is not there is a ProjectError."""
        table, column = PLACES[kind]
        if kind == "memory":
            row = self.db.execute("SELECT rowid FROM meta WHERE key = 'memory'").fetchone()
            if row is None:
                return Excerpt("", 0, 0)
            number = row[0]
        found = self.db.execute(
            f"SELECT typeof({column}) FROM {table} WHERE rowid = ?", [number]
        ).fetchone()
        if found is None:
            raise ProjectError(f"No {kind} with id {number} in this project")
        name = self._text_name(kind, number)
        if found[0] not in ("text", "blob") or not self._stored_as_utf8():
            value = self.db.execute(f"SELECT {column} FROM {table} WHERE rowid = ?", [number])
            return string_excerpt(as_text(value.fetchone()[0], name), limit, end)
        with self.db.conn.blobopen(table, column, number, readonly=True) as blob:
            size = len(blob)
            start = max(0, size - limit) if end else 0
            blob.seek(start)
            raw = blob.read(min(max(limit, 0), size))
        text = decoded(after_cut(raw) if start else raw, name, final=start + len(raw) >= size)
        return Excerpt(text, len(raw), size)

    def _stored_as_utf8(self) -> bool:
        """Whether the file keeps its text as UTF-8 (SQLite's default: then blob reads are
        text)."""
        if getattr(self, "_utf8", None) is None:
            self._utf8 = self.db.execute("PRAGMA encoding").fetchone()[0] == "UTF-8"
        return self._utf8

    def _text_name(self, kind: str, number: int) -> Callable[[], str]:
        """Which text it is, in words a writer reads (worked out only when a line needs it)."""

        def name() -> str:
            if kind == "memory":
                return f"{self.path.name}: the project's memory"
            table = "notes" if kind == "note" else "documents"
            row = self.db.execute(f"SELECT title FROM {table} WHERE id = ?", [number]).fetchone()
            what = "the synopsis of document" if kind == "synopsis" else kind
            return f"{self.path.name}: {what} {number} '{row[0] if row else '?'}'"

        return name

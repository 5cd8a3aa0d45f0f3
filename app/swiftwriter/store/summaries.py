"""A document's rolling summary, kept in the project file: what slid out of a long take's window,
summarised by the model after the take (writing/rolling.py), or written or edited by the writer. The
document's next takes read it as part of their pinned head (writing/context.py), so chapter 12 still
knows what happened in chapter 2. Whether the model writes it at all is a project setting.
Mixed into Project, which supplies the connection, the lock and `_write`."""

from __future__ import annotations

from dataclasses import dataclass

from swiftwriter.store.documents import _locked
from swiftwriter.store.records import ProjectError, check_text, now
from swiftwriter.store.texts import as_text

SUMMARY_SOURCES = ("model", "writer")  # who wrote the text last
MAX_SUMMARY_CHARS = 100_000  # a prompt holds a few hundred tokens of it anyway


@dataclass(frozen=True)
class Summary:
    doc_id: int
    text: str = ""
    source: str = "writer"  # model: the rolling summary wrote it last; writer: edited by hand
    modified: str = ""


class SummariesMixin:
    """Rolling summaries per document, and whether the model writes them (mixed into Project)."""

    @_locked
    def summary(self, doc_id: int) -> Summary:
        """The document's rolling summary (an empty one where none was written)."""
        row = self.db.execute(
            "SELECT text, source, modified FROM summaries WHERE doc_id = ?", [doc_id]
        ).fetchone()
        if row is None:
            return Summary(doc_id)
        text = as_text(row[0], lambda: f"{self.path.name}: the summary of document {doc_id}")
        source = row[1] if row[1] in SUMMARY_SOURCES else "writer"
        return Summary(doc_id, text, source, row[2] or "")

    def set_summary(self, doc_id: int, text: str, source: str = "writer") -> Summary:
        """Write (or, with a blank text, clear) the document's rolling summary."""
        text = check_text(text, "summary").strip()
        if len(text) > MAX_SUMMARY_CHARS:
            raise ProjectError(
                f"A summary has at most {MAX_SUMMARY_CHARS:,} characters, not {len(text):,}"
            )
        if source not in SUMMARY_SOURCES:
            raise ProjectError(f"A summary is written by {' or '.join(SUMMARY_SOURCES)}")
        with self._write() as db:
            self._doc_row(doc_id)
            if text:
                row = {"doc_id": doc_id, "text": text, "source": source, "modified": now()}
                db["summaries"].upsert(row, pk="doc_id")
            else:
                db.execute("DELETE FROM summaries WHERE doc_id = ?", [doc_id])
        return self.summary(doc_id)

    @property
    def rolling_summary(self) -> bool:
        """Whether the model summarises what slides out of a take's window (on unless the
        writer switched it off); off, no summary is written nor read by a take."""
        return self.meta_value("rolling_summary") != "off"

    def set_rolling_summary(self, on: bool) -> None:
        self.update_meta(rolling_summary="on" if on else "off")

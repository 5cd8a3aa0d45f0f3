"""Generations in the store: streamed in while they run, kept whatever happens to them.

A GenerationRecord buffers pieces and writes them as an append-only chunk about once a second,
so a crash loses at most the last second; `finish` folds the chunks into the generation row (and,
if asked, appends the text to its document) in one transaction. A row still 'streaming' that no
live record owns is an interrupted generation, offered for recovery."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from swiftwriter.store.records import (
    Generation,
    ProjectError,
    check_id,
    from_json,
    now,
    pack_ids,
    to_json,
    unpack_ids,
)
from swiftwriter.store.schema import GENERATION_STATUSES

INTERRUPTED = "interrupted: SwiftWriter stopped while this generation was streaming"


OVERLAP_MIN = 16  # characters of a take already in place before they count as the take's


def recovery_point(document: str, take: str, written_after: str | None) -> tuple[int, str]:
    """Where a recovered take goes back into `document` and what of it is still missing: after
    the last occurrence of `written_after` (the text that preceded the take when it started),
    else at the end. The part of the take already there (all of it, or a beginning of at least
    OVERLAP_MIN characters, say from a save during the take) is not added again."""
    at = len(document)
    if isinstance(written_after, str):
        found = document.rfind(written_after) if written_after else 0
        if found >= 0:
            at = found + len(written_after)
    present = 0
    for a, b in zip(document[at:], take, strict=False):
        if a != b:
            break
        present += 1
    if present == len(take) or present >= OVERLAP_MIN:
        return at + present, take[present:]
    return at, take


class GenerationRecord:
    """The writing end of one generation. Not thread-safe by itself: one streamer per record."""

    def __init__(self, project, gen_id: int, doc_id: int, flush_interval: float = 1.0):
        self.project = project
        self.id = gen_id
        self.doc_id = doc_id
        self.flush_interval = flush_interval
        self.status = "streaming"
        self._pieces: list[str] = []
        self._ids: list[int] = []
        self._flushed_pieces = 0
        self._flushed_ids = 0
        self._seq = 0
        self._last_flush = time.monotonic()

    @property
    def text(self) -> str:
        return "".join(self._pieces)

    @property
    def token_ids(self) -> list[int]:
        return list(self._ids)

    @property
    def flushed_tokens(self) -> int:
        return self._flushed_ids

    @property
    def closed(self) -> bool:
        return self.status != "streaming"

    def append(self, text_piece: str, token_ids: Sequence[int] = ()) -> bool:
        """Buffer a piece; returns True when this call also saved the buffer to the file."""
        if self.closed:
            raise ProjectError(f"Generation {self.id} is already {self.status}")
        if not isinstance(text_piece, str):
            raise ProjectError("A generated piece must be text")
        ids = [int(t) for t in token_ids]
        if any(t < 0 or t > 0xFFFFFFFF for t in ids):
            raise ProjectError("Token ids must be whole numbers from 0 to 4294967295")
        if text_piece:
            self._pieces.append(text_piece)
        self._ids.extend(ids)
        if time.monotonic() - self._last_flush >= self.flush_interval:
            return self.flush()
        return False

    def flush(self) -> bool:
        """Write what is buffered as one chunk (one small transaction)."""
        if self.closed:
            return False
        text = "".join(self._pieces[self._flushed_pieces :])
        ids = self._ids[self._flushed_ids :]
        self._last_flush = time.monotonic()
        if not text and not ids:
            return False
        with self.project._write() as db:
            db["generation_chunks"].insert(
                {
                    "generation_id": self.id,
                    "seq": self._seq,
                    "text": text,
                    "token_ids": pack_ids(ids),
                    "created": now(),
                }
            )
            db.execute(
                "UPDATE generations SET n_tokens = n_tokens + ?, updated = ? WHERE id = ?",
                [len(ids), now(), self.id],
            )
        self._seq += 1
        self._flushed_pieces, self._flushed_ids = len(self._pieces), len(self._ids)
        return True

    def finish(
        self,
        status: str = "finished",
        stats: Mapping | None = None,
        error: str | None = None,
        append_to_document: bool = False,
    ) -> Generation:
        """Close the generation; with `append_to_document`, its text joins the document in
        the same transaction, so the two never disagree: where it was written (after its
        `written_after` text), else at the end."""
        if status not in GENERATION_STATUSES or status == "streaming":
            raise ProjectError(
                f"A generation ends as finished, cancelled or failed, not {status!r}"
            )
        if self.closed:
            raise ProjectError(f"Generation {self.id} is already {self.status}")
        text, stats_json = self.text, to_json(dict(stats or {}))
        with self.project._write() as db:
            db.execute(
                "UPDATE generations SET text = ?, token_ids = ?, n_tokens = ?, status = ?, "
                "stats = ?, error = ?, finished = ?, updated = ? WHERE id = ?",
                [
                    text,
                    pack_ids(self._ids),
                    len(self._ids),
                    status,
                    stats_json,
                    None if error is None else str(error),
                    now(),
                    now(),
                    self.id,
                ],
            )
            db.execute("DELETE FROM generation_chunks WHERE generation_id = ?", [self.id])
            if append_to_document:
                gen = self.project.generation(self.id, with_tokens=False)
                self.project._restore_into_document(gen, gen.settings.get("written_after"))
        self.status = status
        self.project._live.pop(self.id, None)
        return self.project.generation(self.id)

    def __enter__(self) -> GenerationRecord:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self.closed:
            self.finish(
                "failed" if exc is not None else "cancelled", error=repr(exc) if exc else None
            )


class GenerationsMixin:
    """Generations: started, streamed, listed and recovered (mixed into Project)."""

    _GEN_COLUMNS = (
        "id, doc_id, snapshot_id, prompt_hash, model_id, tokenizer_id, settings, stats, text, "
        "n_tokens, status, error, applied, started, finished"
    )

    def start_generation(
        self,
        doc_id: int,
        prompt_hash: str,
        model_id: str,
        tokenizer_id: str,
        settings: Mapping | None = None,
        flush_interval: float = 1.0,
    ) -> GenerationRecord:
        """Snapshot the document, then open a 'streaming' generation row for it."""
        for name, value in (
            ("prompt hash", prompt_hash),
            ("model id", model_id),
            ("tokenizer id", tokenizer_id),
        ):
            if not isinstance(value, str) or not value:
                raise ProjectError(f"A generation needs a {name} (text), not {value!r}")
        if not (isinstance(flush_interval, int | float) and 0 <= flush_interval <= 60):
            raise ProjectError(
                f"The flush interval must be 0 to 60 seconds, not {flush_interval!r}"
            )
        settings_json = to_json(dict(settings or {}))
        with self._write() as db:
            self._doc_row(doc_id)
            snapshot_id = self.snapshot(doc_id, reason="before generation")
            stamp = now()
            gen_id = (
                db["generations"]
                .insert(
                    {
                        "doc_id": doc_id,
                        "snapshot_id": snapshot_id,
                        "prompt_hash": prompt_hash,
                        "model_id": model_id,
                        "tokenizer_id": tokenizer_id,
                        "settings": settings_json,
                        "stats": "{}",
                        "text": "",
                        "n_tokens": 0,
                        "status": "streaming",
                        "applied": 0,
                        "started": stamp,
                        "updated": stamp,
                    }
                )
                .last_pk
            )
        record = GenerationRecord(self, gen_id, doc_id, flush_interval)
        self._live[gen_id] = record
        return record

    def generation(self, gen_id: int, with_tokens: bool = True) -> Generation:
        check_id(gen_id, "generation")
        with self._mutex:
            rows = self._generation_rows("WHERE id = ?", [gen_id], with_tokens)
        if not rows:
            raise ProjectError(f"No generation with id {gen_id} in this project")
        return rows[0]

    def generations(self, doc_id: int | None = None, with_tokens: bool = False) -> list[Generation]:
        """Generations, oldest first; a streaming one shows the text saved so far."""
        with self._mutex:
            if doc_id is None:
                return self._generation_rows("", [], with_tokens)
            self._doc_row(doc_id, deleted=True)
            return self._generation_rows("WHERE doc_id = ?", [doc_id], with_tokens)

    def interrupted_generations(self) -> list[Generation]:
        """Generations left 'streaming' by a process that stopped (crash, kill, power cut).

        In a read-only view while another instance writes, its live generations are not
        interrupted, so none are reported."""
        with self._mutex:
            if self.writer_elsewhere():
                return []
            rows = self._generation_rows("WHERE status = 'streaming'", [], False)
        return [g for g in rows if g.id not in self._live]

    def recover_generation(self, gen_id: int, append: bool = True) -> Generation:
        """Close an interrupted generation as failed, keeping its saved text; with `append`,
        that text also goes back into its document where it was written (after the text its
        settings name as `written_after`, else at the end), and never twice: text already
        there is skipped."""
        with self._write():
            gen = self.generation(gen_id)
            if gen.status != "streaming" or gen_id in self._live:
                raise ProjectError(f"Generation {gen_id} is not an interrupted one ({gen.status})")
            self.db.execute(
                "UPDATE generations SET text = ?, token_ids = ?, n_tokens = ?, status = 'failed', "
                "error = ?, finished = ?, updated = ? WHERE id = ?",
                [
                    gen.text,
                    pack_ids(gen.token_ids),
                    len(gen.token_ids),
                    INTERRUPTED,
                    now(),
                    now(),
                    gen_id,
                ],
            )
            self.db.execute("DELETE FROM generation_chunks WHERE generation_id = ?", [gen_id])
            if append and gen.text:
                self._restore_into_document(gen, gen.settings.get("written_after"))
        return self.generation(gen_id)

    def _restore_into_document(self, gen: Generation, written_after) -> bool:
        """Inside a transaction: put a recovered take back where it was written."""
        if not self._exists(gen.doc_id):
            return False
        text = self.db.execute("SELECT text FROM documents WHERE id = ?", [gen.doc_id]).fetchone()[
            0
        ]
        at, take = recovery_point(text, gen.text, written_after)
        if take:
            self.db.execute(
                "UPDATE documents SET text = ?, modified = ? WHERE id = ?",
                [text[:at] + take + text[at:], now(), gen.doc_id],
            )
        self.db.execute("UPDATE generations SET applied = 1 WHERE id = ?", [gen.id])
        return True

    # -- pieces -----------------------------------------------------------------------------
    def _generation_rows(self, where: str, params: list, with_tokens: bool) -> list[Generation]:
        columns = self._GEN_COLUMNS + (", token_ids" if with_tokens else "")
        out = []
        for row in self.db.query(f"SELECT {columns} FROM generations {where} ORDER BY id", params):
            text, ids = row["text"], unpack_ids(row.pop("token_ids", None)) if with_tokens else None
            n_tokens = row["n_tokens"]
            if row["status"] == "streaming":  # the text so far lives in its chunks
                chunks = list(
                    self.db.execute(
                        "SELECT text, token_ids FROM generation_chunks WHERE generation_id = ? "
                        "ORDER BY seq",
                        [row["id"]],
                    )
                )
                text = "".join(c[0] for c in chunks)
                all_ids = [t for c in chunks for t in unpack_ids(c[1])]
                n_tokens = len(all_ids)
                ids = all_ids if with_tokens else None
            out.append(
                Generation(
                    **{
                        **row,
                        "text": text,
                        "n_tokens": n_tokens,
                        "settings": from_json(row["settings"], {}),
                        "stats": from_json(row["stats"], {}),
                        "applied": bool(row["applied"]),
                        "token_ids": ids,
                    }
                )
            )
        return out

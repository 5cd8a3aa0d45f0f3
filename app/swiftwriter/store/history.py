"""What history seeding reads from a project: which texts exist now (with fingerprints, so a
cache knows what changed), their token ids, and the stored drafting cache per tokenizer.

Each text gives the history its end only, read from the file without the rest: a document or
note its last HISTORY_TEXT_BYTES, a take its last HISTORY_TAKE_TOKENS ids (a novel's chapter is
a few dozen kilobytes; a 200 MB chapter or a take of 100 million tokens was read, tokenized and
sorted whole before the take could begin). A fingerprint covers what is read.

The store keeps the cache as opaque parts; the session builds and updates it (the engine's
HistoryIndex), so the store never needs the engine, nor the engine the store."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping

from swiftwriter.store.documents import _locked
from swiftwriter.store.records import ProjectError, check_id, now, unpack_ids

Tokenize = Callable[[str], list[int]]
# what of each text drafts: a chapter of up to some 40,000 words, or a take of 65,536 tokens,
# drafts whole; a longer one by its end
HISTORY_TEXT_BYTES = 1 << 18
HISTORY_TAKE_TOKENS = 1 << 16


class HistoryMixin:
    """History inputs and n-gram caches (mixed into Project)."""

    # -- inputs ---------------------------------------------------------------
    def history_fingerprints(self, tokenizer_id: str, documents: bool = True) -> dict[str, str]:
        """What history seeding would read now, as key -> fingerprint ('g12': generation 12,
        'd3': document 3, 'n5': note 5). An unchanged fingerprint means unchanged tokens, so a
        cache built earlier only needs the keys whose fingerprint moved."""
        out: dict[str, str] = {}
        with self._mutex:
            for gen_id, n in self.db.execute(
                "SELECT id, n_tokens FROM generations WHERE tokenizer_id = ? AND status != "
                "'streaming' AND n_tokens > 0 ORDER BY id",
                [tokenizer_id],
            ):
                out[f"g{gen_id}"] = f"n{n}"
            if documents:
                for (doc_id,) in self.db.execute(
                    "SELECT id FROM documents WHERE deleted IS NULL ORDER BY id"
                ).fetchall():
                    text = self._history_text("d", doc_id)
                    if text:
                        out[f"d{doc_id}"] = _digest(text)
                for (note_id,) in self.db.execute("SELECT id FROM notes ORDER BY id").fetchall():
                    out[f"n{note_id}"] = _digest(self._history_text("n", note_id))
        return out

    def history_tokens(self, key: str, tokenize: Tokenize | None = None) -> list[int]:
        """The token ids behind one history key (documents and notes need `tokenize`)."""
        kind, number = key[:1], key[1:]
        if kind not in ("g", "d", "n") or not number.isdigit():
            raise ProjectError(f"Unknown history key {key!r}")
        if kind == "g":
            return self._take_tail(int(number))
        if tokenize is None:
            raise ProjectError("Documents and notes are text: history needs a tokenizer")
        return list(tokenize(self._history_text(kind, int(number))))

    def _history_text(self, kind: str, number: int) -> str:
        """The end of a document ('d'), or a note's title and the end of its text ('n')."""
        if kind == "d":
            return self.excerpt("document", number, HISTORY_TEXT_BYTES).text
        with self._mutex:
            row = self.db.execute("SELECT title FROM notes WHERE id = ?", [number]).fetchone()
        if row is None:
            raise ProjectError(f"No note with id {number} in this project")
        return f"{row[0]}\n{self.excerpt('note', number, HISTORY_TEXT_BYTES).text}"

    @_locked
    def _take_tail(self, gen_id: int) -> list[int]:
        """The last HISTORY_TAKE_TOKENS ids of a closed take, read without the rest."""
        check_id(gen_id, "generation")
        found = self.db.execute(
            "SELECT typeof(token_ids) FROM generations WHERE id = ?", [gen_id]
        ).fetchone()
        if found is None:
            raise ProjectError(f"No generation with id {gen_id} in this project")
        if found[0] != "blob":
            return []
        with self.db.conn.blobopen("generations", "token_ids", gen_id, readonly=True) as blob:
            whole = len(blob) // 4
            blob.seek(4 * max(0, whole - HISTORY_TAKE_TOKENS))
            return unpack_ids(blob.read(4 * min(whole, HISTORY_TAKE_TOKENS)))

    def history_token_sequences(
        self, tokenizer_id: str, tokenize: Tokenize | None = None
    ) -> Iterator[list[int]]:
        """Every earlier generation made with this tokenizer, then (given `tokenize`) every
        document and note, as token-id lists."""
        for key in self.history_fingerprints(tokenizer_id, documents=tokenize is not None):
            tokens = self.history_tokens(key, tokenize)
            if tokens:
                yield tokens

    def load_ngram_cache(self, tokenizer_id: str) -> dict[str, bytes]:
        """The stored parts of the drafting cache for this tokenizer ({} when none)."""
        with self._mutex:
            rows = self.db.execute(
                "SELECT part, data FROM ngram_caches WHERE tokenizer_id = ?", [tokenizer_id]
            )
            return {part: bytes(data) for part, data in rows}

    def save_ngram_cache(
        self, tokenizer_id: str, parts: Mapping[str, bytes], replace: bool = False
    ) -> None:
        """Write the given parts (the others stay) in one transaction; `replace` drops the rest."""
        if not isinstance(tokenizer_id, str) or not tokenizer_id:
            raise ProjectError("A drafting cache needs a tokenizer id")
        with self._write() as db:
            if replace:
                db.execute("DELETE FROM ngram_caches WHERE tokenizer_id = ?", [tokenizer_id])
            stamp = now()
            db["ngram_caches"].upsert_all(
                [
                    {
                        "tokenizer_id": tokenizer_id,
                        "part": name,
                        "data": bytes(data),
                        "updated": stamp,
                    }
                    for name, data in parts.items()
                ],
                pk=("tokenizer_id", "part"),
            )

    def drop_ngram_cache(self, tokenizer_id: str | None = None) -> None:
        with self._write() as db:
            if tokenizer_id is None:
                db.execute("DELETE FROM ngram_caches")
            else:
                db.execute("DELETE FROM ngram_caches WHERE tokenizer_id = ?", [tokenizer_id])


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()

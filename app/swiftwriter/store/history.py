"""What history seeding reads from a project: which texts exist now (with fingerprints, so a
cache knows what changed), their token ids, and the stored drafting cache per tokenizer.

The store keeps the cache as opaque parts; the session builds and updates it (the engine's
HistoryIndex), so the store never needs the engine, nor the engine the store."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping

from swiftwriter.store.records import ProjectError, now

Tokenize = Callable[[str], list[int]]


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
                for doc_id, text in self.db.execute(
                    "SELECT id, text FROM documents WHERE deleted IS NULL AND text != '' ORDER BY id"
                ):
                    out[f"d{doc_id}"] = _digest(text)
                for note_id, title, text in self.db.execute(
                    "SELECT id, title, text FROM notes ORDER BY id"
                ):
                    out[f"n{note_id}"] = _digest(f"{title}\n{text}")
        return out

    def history_tokens(self, key: str, tokenize: Tokenize | None = None) -> list[int]:
        """The token ids behind one history key (documents and notes need `tokenize`)."""
        kind, number = key[:1], key[1:]
        if kind not in ("g", "d", "n") or not number.isdigit():
            raise ProjectError(f"Unknown history key {key!r}")
        with self._mutex:
            if kind == "g":
                return self.generation(int(number)).token_ids or []
            if tokenize is None:
                raise ProjectError("Documents and notes are text: history needs a tokenizer")
            if kind == "d":
                text = self._doc_row(int(number))["text"]
            else:
                note = self.note(int(number))
                text = f"{note.title}\n{note.text}"
        return list(tokenize(text))

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

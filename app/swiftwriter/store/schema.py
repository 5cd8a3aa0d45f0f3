"""The project file's schema, one numbered migration per format change.

`PRAGMA user_version` holds the format number and `PRAGMA application_id` marks the file as
ours, so a project is recognised (and an unknown or newer file refused) before anything is
written. A migration runs inside the caller's transaction: it either completes or leaves the
file as it was."""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections.abc import Callable

import sqlite_utils

APPLICATION_ID = 0x53575254  # "SWRT"
SCHEMA_VERSION = 5

GENERATION_STATUSES = ("streaming", "finished", "cancelled", "failed")


def _v1_documents_snapshots_notes(db: sqlite_utils.Database) -> None:
    """The first format: metadata, the document tree, snapshots and notes."""
    db["meta"].create({"key": str, "value": str}, pk="key", not_null={"value"})
    db["documents"].create(
        {
            "id": int,
            "parent_id": int,
            "kind": str,
            "title": str,
            "text": str,
            "position": int,
            "created": str,
            "modified": str,
        },
        pk="id",
        foreign_keys=[("parent_id", "documents", "id")],
        not_null={"kind", "title", "text", "position"},
        defaults={"text": ""},
    )
    db["documents"].create_index(["parent_id", "position"])
    db["snapshots"].create(
        {
            "id": int,
            "doc_id": int,
            "title": str,
            "text": str,
            "reason": str,
            "created": str,
        },
        pk="id",
        foreign_keys=[("doc_id", "documents", "id")],
        not_null={"doc_id", "text", "created"},
    )
    db["snapshots"].create_index(["doc_id"])
    db["notes"].create(
        {
            "id": int,
            "title": str,
            "text": str,
            "pinned": int,
            "position": int,
            "created": str,
            "modified": str,
        },
        pk="id",
        not_null={"title", "text", "pinned", "position"},
        defaults={"text": "", "pinned": 0},
    )


def _v2_generations_and_caches(db: sqlite_utils.Database) -> None:
    """Generations (streamed in chunks), n-gram caches per tokenizer, and a trash for documents."""
    db["documents"].add_column("deleted", str)
    db["generations"].create(
        {
            "id": int,
            "doc_id": int,
            "snapshot_id": int,
            "prompt_hash": str,
            "model_id": str,
            "tokenizer_id": str,
            "settings": str,
            "stats": str,
            "text": str,
            "token_ids": bytes,
            "n_tokens": int,
            "status": str,
            "error": str,
            "applied": int,
            "started": str,
            "updated": str,
            "finished": str,
        },
        pk="id",
        foreign_keys=[("doc_id", "documents", "id"), ("snapshot_id", "snapshots", "id")],
        not_null={"doc_id", "text", "n_tokens", "status", "applied"},
        defaults={"text": "", "n_tokens": 0, "applied": 0},
    )
    db["generations"].create_index(["doc_id"])
    db["generations"].create_index(["status"])
    db["generations"].create_index(["tokenizer_id"])
    # While a generation streams its text lands here, one row per flush: an append-only
    # insert per second instead of rewriting an ever longer text; `finish` folds them in.
    db["generation_chunks"].create(
        {"generation_id": int, "seq": int, "text": str, "token_ids": bytes, "created": str},
        pk=("generation_id", "seq"),
        foreign_keys=[("generation_id", "generations", "id")],
        not_null={"text"},
    )
    # Opaque parts of the drafting cache, owned by whoever builds it (the session).
    db["ngram_caches"].create(
        {"tokenizer_id": str, "part": str, "data": bytes, "updated": str},
        pk=("tokenizer_id", "part"),
        not_null={"data"},
    )


def _v3_synopses(db: sqlite_utils.Database) -> None:
    """A synopsis per document: what the story context uses when the text does not fit."""
    db["documents"].add_column("synopsis", str, not_null_default="")


def _v4_lorebook(db: sqlite_utils.Database) -> None:
    """Lorebook (world info) entries: text that enters the prompt when one of its keys (a JSON
    list of words) appears near the cursor."""
    db["lore"].create(
        {
            "id": int,
            "title": str,
            "keys": str,
            "content": str,
            "pinned": int,
            "priority": int,
            "enabled": int,
            "created": str,
            "modified": str,
        },
        pk="id",
        not_null={"title", "keys", "content", "pinned", "priority", "enabled"},
        defaults={"keys": "[]", "content": "", "pinned": 0, "priority": 0, "enabled": 1},
    )


def _v5_rolling_summaries(db: sqlite_utils.Database) -> None:
    """A rolling summary per document: what slid out of a long take's window, summarised by the
    model after the take (or written by the writer), read by the document's next takes."""
    db["summaries"].create(
        {"doc_id": int, "text": str, "source": str, "modified": str},
        pk="doc_id",
        foreign_keys=[("doc_id", "documents", "id")],
        not_null={"text", "source"},
        defaults={"text": "", "source": "writer"},
    )


MIGRATIONS: dict[int, Callable[[sqlite_utils.Database], None]] = {
    1: _v1_documents_snapshots_notes,
    2: _v2_generations_and_caches,
    3: _v3_synopses,
    4: _v4_lorebook,
    5: _v5_rolling_summaries,
}


def version_of(db: sqlite_utils.Database) -> int:
    return db.execute("PRAGMA user_version").fetchone()[0]


def application_id_of(db: sqlite_utils.Database) -> int:
    return db.execute("PRAGMA application_id").fetchone()[0]


def migrate(db: sqlite_utils.Database, target: int = SCHEMA_VERSION) -> list[int]:
    """Bring the file up to `target` inside one transaction; returns the versions applied."""
    applied = []
    with db.atomic():
        current = version_of(db)
        if current == 0:
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        for version in range(current + 1, target + 1):
            MIGRATIONS[version](db)
            db.execute(f"PRAGMA user_version = {version}")
            applied.append(version)
    return applied


@functools.cache
def expected_objects(version: int) -> frozenset[tuple[str, str]]:
    """(type, name) of every table, index, trigger and view a file of format `version` has."""
    db = sqlite_utils.Database(sqlite3.connect(":memory:"), execute_plugins=False)
    migrate(db, version)
    names = frozenset(_objects(db.conn))
    db.close()
    return names


def _objects(conn) -> list[tuple[str, str]]:
    return [
        (kind, name)
        for kind, name in conn.execute("SELECT type, name FROM sqlite_master")
        if not name.startswith("sqlite_")  # SQLite's own (autoindexes, sequences, statistics)
    ]


def foreign_objects(conn, version: int) -> list[tuple[str, str]]:
    """What a file holds that the migrations never make: a trigger planted in a project runs
    on the writer's own saves (one that deletes documents on update), so it is not kept."""
    expected = expected_objects(version)
    order = {"trigger": 0, "view": 1, "table": 2, "index": 3}
    found = [o for o in _objects(conn) if o not in expected]
    return sorted(found, key=lambda o: (order.get(o[0], 4), o[1]))


def drop_foreign(conn, version: int) -> list[str]:
    """Drop the triggers, views, tables and indexes the app does not make, in the caller's
    transaction; returns what was dropped ('trigger wipe', ...)."""
    dropped = []
    for kind, name in foreign_objects(conn, version):
        if kind not in ("trigger", "view", "table", "index"):
            continue
        quoted = '"' + name.replace('"', '""') + '"'
        conn.execute(f"DROP {kind.upper()} IF EXISTS {quoted}")
        dropped.append(f"{kind} {name}")
    return dropped


def remove_planted(db: sqlite_utils.Database, version: int, where: str) -> list[str]:
    """Drop what the app does not make before anything writes (one transaction), said once
    in the log: the writer's saves then run only the app's own SQL."""
    with db.atomic():
        dropped = drop_foreign(db.conn, version)
    if dropped:
        logging.getLogger(__name__).warning(
            "%s held things SwiftWriter does not make (%s): removed", where, ", ".join(dropped)
        )
    return dropped


@functools.cache
def expected_tables(version: int) -> frozenset[str]:
    """The tables a file of format `version` has (built once in memory by the migrations)."""
    db = sqlite_utils.Database(sqlite3.connect(":memory:"), execute_plugins=False)
    migrate(db, version)
    names = frozenset(n for n in db.table_names() if not n.startswith("sqlite_"))
    db.close()
    return names

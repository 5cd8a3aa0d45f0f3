"""The lorebook (world info) and the standing author's note, kept in the project file so they
travel with it (and with its backups, which copy the whole file).

An entry has a title, its keys (the words that bring it into the prompt), its text, a
priority, and whether it is pinned (in every prompt) or enabled at all; lorebook.py decides
which fire for a take. The author's note and the lorebook's budget and scan live in the
metadata. Mixed into Project, which supplies the connection, the lock and `_write`."""

from __future__ import annotations

from swiftwriter.lorebook import (
    BUDGET_RANGE,
    DEFAULT_BUDGET,
    DEFAULT_NOTE_DEPTH,
    DEFAULT_SCAN,
    DEPTH_RANGE,
    SCAN_RANGE,
    AuthorsNote,
    Lorebook,
)
from swiftwriter.store.documents import _locked
from swiftwriter.store.records import (
    LoreEntry,
    ProjectError,
    check_id,
    check_text,
    check_title,
    from_json,
    now,
    to_json,
)

MAX_KEYS = 100  # keys of one entry
MAX_KEY_CHARS = 100  # a key is a name or a short phrase
MAX_CONTENT_CHARS = 100_000  # an entry's text: a few pages at most enter a prompt anyway
MAX_PRIORITY = 1_000_000


def check_keys(keys) -> tuple[str, ...]:
    """Keys as a list of words or phrases, or one text of them separated by commas; blanks
    dropped, repeats (in any case) kept once."""
    if isinstance(keys, str):
        keys = keys.split(",")
    if not isinstance(keys, list | tuple):
        raise ProjectError(f"Lorebook keys are a list of words, not {type(keys).__name__}")
    out: dict[str, str] = {}
    for key in keys:
        key = check_text(key, "lorebook key").strip()
        if "\n" in key or len(key) > MAX_KEY_CHARS:
            raise ProjectError(f"A lorebook key is one line of at most {MAX_KEY_CHARS} characters")
        if key:
            out.setdefault(key.casefold(), key)
    if len(out) > MAX_KEYS:
        raise ProjectError(f"A lorebook entry has at most {MAX_KEYS} keys, not {len(out)}")
    return tuple(out.values())


def check_whole(value, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ProjectError(f"The {what} is a whole number from {low:,} to {high:,}, not {value!r}")
    return value


def entry_row(title, content="", keys=(), pinned=False, priority=0, enabled=True) -> dict:
    """A checked row for the lore table (without the time stamps)."""
    content = check_text(content, "lorebook entry's text")
    if len(content) > MAX_CONTENT_CHARS:
        raise ProjectError(
            f"A lorebook entry's text has at most {MAX_CONTENT_CHARS:,} characters, "
            f"not {len(content):,}"
        )
    return {
        "title": check_title(title, "lorebook entry"),
        "keys": to_json(list(check_keys(keys))),
        "content": content,
        "pinned": int(bool(pinned)),
        "priority": check_whole(priority, "priority", -MAX_PRIORITY, MAX_PRIORITY),
        "enabled": int(bool(enabled)),
    }


def _stored_whole(value, default: int, low: int, high: int) -> int:
    """A number read from the file; a damaged or out-of-range one means the default."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return number if low <= number <= high else default


class LoreMixin:
    """Lorebook entries and the author's note (mixed into Project)."""

    _LORE_COLUMNS = "id, title, keys, content, pinned, priority, enabled, created, modified"

    @_locked
    def lore_entries(self) -> list[LoreEntry]:
        """Every entry, highest priority first (then the oldest)."""
        rows = self.db.query(f"SELECT {self._LORE_COLUMNS} FROM lore")
        return sorted((self._lore(r) for r in rows), key=lambda e: (-e.priority, e.id))

    @_locked
    def lore_entry(self, entry_id: int) -> LoreEntry:
        check_id(entry_id, "lorebook entry")
        query = f"SELECT {self._LORE_COLUMNS} FROM lore WHERE id = ?"
        row = next(self.db.query(query, [entry_id]), None)
        if row is None:
            raise ProjectError(f"No lorebook entry with id {entry_id} in this project")
        return self._lore(row)

    def add_lore_entry(self, title: str, content: str = "", **fields) -> LoreEntry:
        """One entry; `fields`: keys, pinned, priority, enabled (see `entry_row`)."""
        (entry,) = self.add_lore_entries([{"title": title, "content": content, **fields}])
        return entry

    def add_lore_entries(self, entries: list[dict]) -> list[LoreEntry]:
        """Several entries in one transaction: every one is checked first, then all are
        added, or none."""
        rows = [entry_row(**entry) for entry in entries]
        stamp = now()
        with self._write() as db:
            ids = [db["lore"].insert({**row, "created": stamp, "modified": stamp}).last_pk
                   for row in rows]  # fmt: skip
        return [self.lore_entry(i) for i in ids]

    def update_lore_entry(self, entry_id: int, **changes) -> LoreEntry:
        """Change some of title, content, keys, pinned, priority, enabled."""
        current = self.lore_entry(entry_id)
        unknown = set(changes) - {"title", "content", "keys", "pinned", "priority", "enabled"}
        if unknown:
            raise ProjectError(f"A lorebook entry has no {', '.join(sorted(unknown))}")
        old = {k: getattr(current, k) for k in ("title", "content", "keys", "pinned")}
        old |= {"priority": current.priority, "enabled": current.enabled}
        row = entry_row(**{**old, **changes})
        with self._write() as db:
            self.lore_entry(entry_id)
            db["lore"].update(entry_id, {**row, "modified": now()})
        return self.lore_entry(entry_id)

    def delete_lore_entry(self, entry_id: int) -> None:
        with self._write() as db:
            self.lore_entry(entry_id)
            db.execute("DELETE FROM lore WHERE id = ?", [entry_id])

    # -- what a take uses -------------------------------------------------------------------
    def lorebook(self) -> Lorebook:
        """The enabled entries with the budget and scan a take uses."""
        meta = self.meta
        return Lorebook(
            tuple(e for e in self.lore_entries() if e.enabled),
            scan=_stored_whole(meta.get("lore_scan"), DEFAULT_SCAN, *SCAN_RANGE),
            budget=_stored_whole(meta.get("lore_budget"), DEFAULT_BUDGET, *BUDGET_RANGE),
        )

    def set_lorebook_limits(self, budget: int, scan: int) -> None:
        """The tokens the fired entries may take, and the characters before the cursor whose
        words fire them."""
        budget = check_whole(budget, "lorebook budget", *BUDGET_RANGE)
        scan = check_whole(scan, "lorebook scan", *SCAN_RANGE)
        self.update_meta(lore_budget=str(budget), lore_scan=str(scan))

    @property
    def authors_note(self) -> AuthorsNote:
        meta = self.meta
        depth = _stored_whole(meta.get("authors_note_depth"), DEFAULT_NOTE_DEPTH, *DEPTH_RANGE)
        return AuthorsNote(meta.get("authors_note", ""), depth)

    def set_authors_note(self, text: str, depth: int = DEFAULT_NOTE_DEPTH) -> None:
        text = check_text(text, "author's note").strip()
        depth = check_whole(depth, "author's note depth", *DEPTH_RANGE)
        self.update_meta(authors_note=text, authors_note_depth=str(depth))

    @staticmethod
    def _lore(row: dict) -> LoreEntry:
        """A row as an entry, whatever a damaged file holds in it."""
        keys = from_json(row["keys"] if isinstance(row["keys"], str) else None, [])
        keys = tuple(k for k in keys if isinstance(k, str) and k) if isinstance(keys, list) else ()
        return LoreEntry(
            id=row["id"],
            title=str(row["title"] or ""),
            keys=keys,
            content=str(row["content"] or ""),
            pinned=bool(row["pinned"]),
            priority=_stored_whole(row["priority"], 0, -MAX_PRIORITY, MAX_PRIORITY),
            enabled=bool(row["enabled"]),
            created=row["created"] or "",
            modified=row["modified"] or "",
        )

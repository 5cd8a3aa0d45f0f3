"""World-info files from KoboldAI and SillyTavern, read into lorebook entries.

The shapes read: {"entries": {"0": {...}, ...}} or {"entries": [...]} (SillyTavern, KoboldAI),
{"worldinfo": [...]} (a KoboldAI Lite story) and a bare list (KoboldAI Lite's world-info
export). Of an entry: `key` (a list, or words separated by commas), `content`, `comment` or
`title`, `constant` (pinned), `order` (priority), `disable` or `widisabled`. Secondary keys,
probabilities and placements have no counterpart here and are not read; regular-expression
keys ("/…/i") are left out, since keys here are plain words.

A file from elsewhere is untrusted: larger than MAX_BYTES, nesting deeper than MAX_DEPTH, with
more than MAX_ENTRIES entries or a value of the wrong type, it is refused whole, in one line
naming it and what it broke, and nothing is added."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from swiftwriter.store.lore import entry_row
from swiftwriter.store.records import LoreEntry, ProjectError

MAX_BYTES = 4 << 20  # the largest published lorebooks are a few hundred KB
MAX_DEPTH = 10  # a SillyTavern file nests 5 or 6 levels
MAX_ENTRIES = 5000
MAX_TITLE = 200  # a comment longer than this is cut to its first line and characters
_REGEX_KEY = re.compile(r"/.+/[a-z]*", re.DOTALL)


@dataclass(frozen=True)
class WorldInfo:
    entries: list[dict]  # checked entries, as Project.add_lore_entries takes them
    regex_keys: int = 0  # regular-expression keys left out


def read_world_info(path: Path | str) -> WorldInfo:
    """The entries of a world-info file, every one checked; ProjectError (one line naming the
    file) for anything this reader refuses."""
    file = Path(path).expanduser()
    name = file.name
    data = _parse(file)
    if _deeper_than(data, MAX_DEPTH):
        raise _too_deep(name)
    found = _entries_of(data)
    if found is None:
        raise ProjectError(
            f"{name} is not a KoboldAI or SillyTavern world-info file (no list of entries)"
        )
    if len(found) > MAX_ENTRIES:
        raise ProjectError(
            f"{name} holds {len(found):,} entries; at most {MAX_ENTRIES:,} are imported at once"
        )
    rows, dropped = [], 0
    for label, raw in found:
        try:
            row, regex = _entry(raw, len(rows) + 1)
            entry_row(**row)  # checked here, to name the file and the entry
        except ProjectError as exc:
            raise ProjectError(f"{name}, entry {label}: {exc}") from None
        rows.append(row)
        dropped += regex
    return WorldInfo(rows, dropped)


def import_world_info(project, path: Path | str) -> tuple[list[LoreEntry], int]:
    """Add a world-info file's entries to the project's lorebook, all of them or none;
    returns them with the number of regular-expression keys left out."""
    read = read_world_info(path)
    return project.add_lore_entries(read.entries), read.regex_keys


def _parse(file: Path):
    name = file.name
    try:
        with file.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ProjectError(f"No such file: {file}") from None
    except OSError as exc:
        raise ProjectError(f"Cannot read {name}: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise ProjectError(
            f"{name} is too large for a world-info file (at most {MAX_BYTES >> 20} MB)"
        )
    try:
        return json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ProjectError(f"{name} is not UTF-8 text (byte {exc.start:,})") from None
    except RecursionError:
        raise _too_deep(name) from None
    except json.JSONDecodeError as exc:
        raise ProjectError(f"{name} is not a JSON file ({exc.msg} at line {exc.lineno})") from None
    except ValueError:  # Python reads at most 4,300 digits of a number
        raise ProjectError(f"{name} holds a number with too many digits") from None


def _too_deep(name: str) -> ProjectError:
    return ProjectError(
        f"{name} nests deeper than a world-info file does (at most {MAX_DEPTH} levels)"
    )


def _deeper_than(data, limit: int) -> bool:
    """Whether lists and objects nest more than `limit` levels (walked without recursion)."""
    stack = [(data, 1)] if isinstance(data, dict | list) else []
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        children = value.values() if isinstance(value, dict) else value
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def _entries_of(data) -> list[tuple[str, object]] | None:
    """(label, entry) pairs of the shapes read, or None for another shape."""
    if isinstance(data, dict):
        data = data.get("entries", data.get("worldinfo"))
    if isinstance(data, dict):
        return [(str(k), v) for k, v in data.items()]
    if isinstance(data, list):
        return [(str(i), v) for i, v in enumerate(data, 1)]
    return None


def _field(raw: dict, names: tuple[str, ...], kinds: tuple[type, ...], default):
    """The first of `names` present, checked to be one of `kinds` (never a bool for a number)."""
    for name in names:
        if name in raw and raw[name] is not None:
            value = raw[name]
            wrong = isinstance(value, bool) and bool not in kinds
            if wrong or not isinstance(value, kinds):
                expected = " or ".join(_KIND_NAMES[k] for k in kinds)
                raise ProjectError(f"its {name} is {type(value).__name__}, not {expected}")
            return value
    return default


_KIND_NAMES = {str: "text", list: "a list", bool: "true or false", int: "a whole number"}


def _entry(raw, number: int) -> tuple[dict, int]:
    """An entry as add_lore_entries takes it, and how many regular-expression keys it lost."""
    if not isinstance(raw, dict):
        raise ProjectError(f"it is {type(raw).__name__}, not an object")
    keys = _field(raw, ("key", "keys"), (list, str), [])
    if isinstance(keys, str):
        keys = keys.split(",")
    if not all(isinstance(k, str) for k in keys):
        raise ProjectError("its keys are not all text")
    plain = [k for k in keys if not _REGEX_KEY.fullmatch(k.strip())]
    title = _field(raw, ("comment", "title"), (str,), "").strip().split("\n", 1)[0][:MAX_TITLE]
    first_key = next((k.strip() for k in plain if k.strip()), "")
    disabled = _field(raw, ("disable", "widisabled"), (bool,), False)
    return {
        "title": title or first_key[:MAX_TITLE] or f"Entry {number}",
        "content": _field(raw, ("content",), (str,), ""),
        "keys": plain,
        "pinned": _field(raw, ("constant",), (bool,), False),
        "priority": _field(raw, ("order",), (int,), 0),
        "enabled": not disabled,
    }, len(keys) - len(plain)

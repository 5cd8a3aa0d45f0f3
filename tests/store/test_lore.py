"""The lorebook in the project file: entries kept, ordered and checked; an older project gains
an empty lorebook and keeps the rest; backups carry the entries and the author's note; search
finds entries."""

from __future__ import annotations

import sqlite3

import pytest
import sqlite_utils
from swiftwriter.store import Project, ProjectError, backups, schema
from swiftwriter.store.search import find_in_lore


def test_entries_are_kept_by_priority_and_bad_ones_change_nothing(project):
    low = project.add_lore_entry("Harbour", "A grey harbour.", keys="harbour, quay", priority=1)
    high = project.add_lore_entry("Elena", "Elena keeps the light.", keys=["Elena", "elena", " "],
                                  priority=9, pinned=True)  # fmt: skip
    assert high.keys == ("Elena",) and high.pinned and high.enabled  # repeats and blanks go
    assert [e.title for e in project.lore_entries()] == ["Elena", "Harbour"]
    project.update_lore_entry(low.id, priority=20, enabled=False, keys=["quay"])
    moved = project.lore_entry(low.id)
    assert (moved.priority, moved.enabled, moved.keys) == (20, False, ("quay",))
    assert [e.title for e in project.lore_entries()] == ["Harbour", "Elena"]
    assert [e.title for e in project.lorebook().entries] == ["Elena"]  # a take skips the off
    before = project.lore_entries()
    for bad in (dict(keys=5), dict(keys=["x" * 101]), dict(keys=["a\nb"]),
                dict(priority=True), dict(priority=10**7), dict(title=" "),
                dict(content=b"bytes"), dict(colour="red")):  # fmt: skip
        with pytest.raises(ProjectError):
            project.update_lore_entry(high.id, **bad)
    with pytest.raises(ProjectError):  # one bad entry: none of them is added
        project.add_lore_entries([{"title": "Fine"}, {"title": "Bad", "keys": [1]}])
    assert project.lore_entries() == before
    project.delete_lore_entry(low.id)
    with pytest.raises(ProjectError, match="No lorebook entry"):
        project.lore_entry(low.id)


def test_the_authors_note_and_limits_live_in_the_metadata(project):
    assert project.authors_note.text == "" and project.authors_note.depth == 3
    project.set_authors_note("  Keep it wistful. ", 2)
    project.set_lorebook_limits(budget=64, scan=500)
    assert (project.authors_note.text, project.authors_note.depth) == ("Keep it wistful.", 2)
    assert (project.lorebook().budget, project.lorebook().scan) == (64, 500)
    with pytest.raises(ProjectError):
        project.set_authors_note("x", 0)
    with pytest.raises(ProjectError):
        project.set_lorebook_limits(budget=-1, scan=500)
    project.update_meta(authors_note_depth="deep", lore_budget="9" * 40)  # a damaged file
    assert project.authors_note.depth == 3 and project.lorebook().budget == 512


def test_a_format_3_project_gains_an_empty_lorebook_and_keeps_the_rest(tmp_path):
    old = tmp_path / "Old.swiftwriter"
    conn = sqlite3.connect(old)
    schema.migrate(sqlite_utils.Database(conn), target=3)
    conn.execute("INSERT INTO meta VALUES ('memory', 'A harbour town.')")
    conn.execute("INSERT INTO documents (kind, title, text, position, synopsis) "
                 "VALUES ('chapter', 'One', 'It began.', 0, 'A start.')")  # fmt: skip
    conn.commit()
    conn.close()
    with Project.open(old) as proj:
        assert proj.schema_version() == 4 and proj.lore_entries() == []
        assert proj.memory == "A harbour town."
        assert [(d.title, d.text, d.synopsis) for d in proj.documents()] == [
            ("One", "It began.", "A start.")
        ]
        proj.add_lore_entry("Elena", "The keeper.", keys="Elena")
    assert old.with_name("Old.swiftwriter.format3.bak").exists()


def test_backups_carry_the_lorebook_and_the_authors_note(project, project_path, tmp_path):
    project.add_lore_entry("Elena", "Elena keeps the light.", keys="Elena", priority=4)
    project.set_authors_note("Rain all day.", 5)
    made = project.backup()
    restored = backups.restore(made.path, tmp_path / "Restored.swiftwriter")
    with Project.open(restored, readonly=True) as copy:
        assert [(e.title, e.keys, e.content, e.priority) for e in copy.lore_entries()] == [
            ("Elena", ("Elena",), "Elena keeps the light.", 4)
        ]
        assert (copy.authors_note.text, copy.authors_note.depth) == ("Rain all day.", 5)


def test_a_damaged_entry_row_still_reads(project, project_path):
    project.add_lore_entry("Elena", "The keeper.", keys="Elena")
    project.close()
    conn = sqlite3.connect(project_path)
    conn.execute("UPDATE lore SET keys = '{not json', priority = 'high'")
    conn.commit()
    conn.close()
    with Project.open(project_path, readonly=True) as view:
        (entry,) = view.lore_entries()
        assert entry.keys == () and entry.priority == 0 and entry.content == "The keeper."


def test_project_search_finds_entries_by_title_keys_and_text(project):
    project.add_lore_entry("Elena", "Keeper of the harbour light.", keys="the keeper")
    project.add_lore_entry("Tom", "Runs cargo by night.", keys="smuggler")
    entries = project.lore_entries()
    assert [m.title for m in find_in_lore(entries, "harbour")] == ["Elena"]
    assert [m.title for m in find_in_lore(entries, "SMUGGLER")] == ["Tom"]
    (match,) = find_in_lore(entries, "cargo")
    assert match.doc_id is None and match.lore_id == entries[1].id and "[cargo]" in match.snippet

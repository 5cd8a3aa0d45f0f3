"""The lorebook in the project file: entries kept, ordered and checked; an older project gains
an empty lorebook and keeps the rest; backups carry the entries and the author's note; search
finds entries; world-info files from SillyTavern and KoboldAI are imported, and a hostile one
is refused in one line with nothing added."""

from __future__ import annotations

import json
import sqlite3

import pytest
import sqlite_utils
from swiftwriter.cli import main
from swiftwriter.store import Project, ProjectError, backups, schema
from swiftwriter.store.search import find_in_lore
from swiftwriter.store.worldinfo import MAX_BYTES, MAX_DEPTH, MAX_ENTRIES, import_world_info

from .conftest import file_digest


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
        assert proj.schema_version() == schema.SCHEMA_VERSION and proj.lore_entries() == []
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


# -- world-info files -------------------------------------------------------------------------
SILLYTAVERN = {
    "name": "Aldermouth",
    "entries": {
        "0": {"uid": 0, "key": ["Elena", "the keeper"], "keysecondary": ["light"],
              "comment": "Elena Marsh", "content": "Elena Marsh keeps the harbour light.",
              "constant": False, "selective": True, "order": 100, "position": 0,
              "disable": False, "extensions": {"depth": 4, "weight": 10}},
        "1": {"uid": 1, "key": ["/smuggl(er|ing)/i", "Tom"], "comment": "",
              "content": "Tom Pender runs cargo at night.", "constant": True, "order": 50,
              "disable": True},
    },
}  # fmt: skip
KOBOLD_LITE = [
    {"key": "Anchor, the inn", "keysecondary": "", "keyanti": "", "content": "The Anchor inn.",
     "comment": "", "folder": None, "selective": False, "constant": False, "probability": 100,
     "widisabled": False},
    {"key": "", "content": "It always rains in Aldermouth.", "comment": "Weather",
     "constant": True},
]  # fmt: skip


def write(path, data) -> str:
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_a_sillytavern_and_a_koboldai_file_are_imported(project, tmp_path):
    added, regex = import_world_info(project, write(tmp_path / "st.json", SILLYTAVERN))
    assert regex == 1  # the pattern key is left out: keys here are words
    elena, tom = added
    assert (elena.title, elena.keys, elena.priority, elena.pinned, elena.enabled) == (
        "Elena Marsh", ("Elena", "the keeper"), 100, False, True)  # fmt: skip
    assert (tom.title, tom.keys, tom.pinned, tom.enabled) == ("Tom", ("Tom",), True, False)
    added, regex = import_world_info(project, write(tmp_path / "lite.json", KOBOLD_LITE))
    assert [(e.title, e.keys, e.pinned) for e in added] == [
        ("Anchor", ("Anchor", "the inn"), False), ("Weather", (), True)]  # fmt: skip
    story = {"gamestarted": True, "worldinfo": KOBOLD_LITE[:1]}  # a saved KoboldAI Lite story
    (anchor,), _ = import_world_info(project, write(tmp_path / "story.json", story))
    assert anchor.content == "The Anchor inn."
    assert len(project.lore_entries()) == 5


def hostile_files(tmp_path) -> dict:
    entry = {"key": ["a"], "content": "x"}
    huge = tmp_path / "huge.json"
    huge.write_bytes(b'{"entries": [' + b" " * MAX_BYTES + b"]}")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    nested = {"entries": [{**entry, "extensions": {"a": [[[[[[[[[[1]]]]]]]]]]}}]}
    return {
        huge: f"at most {MAX_BYTES >> 20} MB",
        deep: f"at most {MAX_DEPTH} levels",
        write(tmp_path / "nested.json", nested): f"at most {MAX_DEPTH} levels",
        write(tmp_path / "many.json", [entry] * (MAX_ENTRIES + 1)): f"at most {MAX_ENTRIES:,}",
        write(tmp_path / "key.json", [{"key": 5, "content": "x"}]): "key is int",
        write(tmp_path / "keys.json", [{"key": ["a", 1], "content": "x"}]): "not all text",
        write(tmp_path / "content.json", [{"key": "a", "content": ["x"]}]): "content is list",
        write(tmp_path / "constant.json", [{**entry, "constant": "yes"}]): "constant is str",
        write(tmp_path / "order.json", [{**entry, "order": True}]): "order is bool",
        write(tmp_path / "huge_order.json", [{**entry, "order": 10**9}]): "priority",
        write(tmp_path / "entry.json", {"entries": {"0": "text"}}): "not an object",
        write(tmp_path / "shape.json", {"entries": 5}): "no list of entries",
        write(tmp_path / "long_key.json", [{**entry, "key": ["k" * 500]}]): "at most 100",
        tmp_path / "text.json": "not a JSON file",
        tmp_path / "latin1.json": "not UTF-8",
        tmp_path / "number.json": "a number with too many digits",
    }


def test_a_hostile_world_info_file_is_refused_in_one_line_and_adds_nothing(
    project, project_path, tmp_path, capsys
):
    project.add_lore_entry("Kept", "Already here.", keys="kept")
    (tmp_path / "text.json").write_text("Elena: the keeper")
    (tmp_path / "latin1.json").write_bytes('[{"content": "café"}]'.encode("latin-1"))
    (tmp_path / "number.json").write_text('[{"key": "a", "order": ' + "9" * 5000 + "}]")
    files = hostile_files(tmp_path)
    before = project.lore_entries()
    for path, limit in files.items():
        with pytest.raises(ProjectError) as refused:
            import_world_info(project, path)
        message = str(refused.value)
        assert "\n" not in message and str(path).rsplit("/", 1)[1] in message, message
        assert limit in message, message
        assert project.lore_entries() == before
    project.close()
    digest = file_digest(project_path)
    for path in files:  # the command line: one line on stderr, exit 1, the file untouched
        assert main(["project", "lore", "import", str(project_path), str(path)]) == 1
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and err.startswith("swiftwriter: "), err
    assert file_digest(project_path) == digest


def test_the_command_line_imports_and_lists_the_lorebook(project, project_path, tmp_path, capsys):
    project.close()
    source = write(tmp_path / "st.json", SILLYTAVERN)
    assert main(["project", "lore", "import", str(project_path), source]) == 0
    assert "Imported 2 lorebook entries" in capsys.readouterr().out
    assert main(["project", "lore", "list", str(project_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "Elena Marsh  [Elena, the keeper]  priority 100" in lines[0]
    assert lines[1].endswith("(pinned, off)")
    assert main(["project", "lore", "list", str(project_path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["title"] for r in rows] == ["Elena Marsh", "Tom"] and rows[1]["pinned"] is True

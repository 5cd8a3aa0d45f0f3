"""`swiftwriter project ...` and `swiftwriter generate PROJECT DOC`: headless use of a project,
listings as JSON, and one clear line for every mistake (exit 1; 2 for a command line that cannot
mean anything)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from swiftwriter.cli import main
from swiftwriter.store import Project
from swiftwriter.store.importing import import_sections

from tests.conftest import build_tiny
from tests.writing.test_session import Latin1Tokenizer

BOOK = """Some words before any heading.

# Part One

## The Boat

It was a *small* boat.

```
# not a heading inside a fence
```

## The Storm

Rain.

# Part Two

## Home
"""


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_new_import_docs_and_show(tmp_path, capsys):
    path = tmp_path / "Novel.swiftwriter"
    src = tmp_path / "book.md"
    src.write_text(BOOK, encoding="utf-8")
    (tmp_path / "notes.txt").write_text("Just a note.\n", encoding="utf-8")
    assert run(capsys, "project", "new", str(path), "--title", "The Keeper")[0] == 0
    code, out, _ = run(capsys, "project", "import", str(path), str(src))
    assert code == 0 and "Imported 6 document(s)" in out
    code, out, _ = run(capsys, "project", "import", str(path), str(tmp_path / "notes.txt"))
    assert code == 0 and "Imported 1 document(s)" in out
    code, out, _ = run(capsys, "project", "docs", str(path))
    assert code == 0 and out.splitlines()[0] == "The Keeper"
    with Project.open(path, readonly=True) as proj:
        docs = [(d.depth, d.kind, d.title) for d in proj.documents()]
    assert docs == [
        (0, "part", "book"),
        (0, "part", "Part One"),
        (1, "chapter", "The Boat"),
        (1, "chapter", "The Storm"),
        (0, "part", "Part Two"),
        (1, "chapter", "Home"),
        (0, "chapter", "notes"),
    ]
    code, out, _ = run(capsys, "project", "show", str(path), "the boat")
    assert code == 0 and "*small* boat" in out and "# not a heading" in out


def test_history_and_recover(tmp_path, capsys):
    path = tmp_path / "Novel.swiftwriter"
    with Project.create(path) as proj:
        doc = proj.add_document("Chapter", "Start.")
        done = proj.start_generation(doc.id, "p", "tiny", "t")
        done.append(" Done.", [1, 2])
        done.finish("finished", {"tau": 2.5, "tokens_per_s": 40.0}, append_to_document=True)
        lost = proj.start_generation(doc.id, "p", "tiny", "t", flush_interval=0)
        lost.append(" Lost?", [3])
        proj._live.clear()  # as if the process had died here
    code, out, _ = run(capsys, "project", "history", str(path))
    assert code == 0
    assert "#1" in out and "tau 2.50, 40.0 tok/s" in out and "streaming" in out
    assert "1 interrupted generation(s) (#2)" in out and "project recover" in out
    code, out, _ = run(capsys, "project", "recover", str(path), "2")
    assert code == 0 and "appended to its document" in out
    with Project.open(path, readonly=True) as proj:
        assert proj.document(doc.id).text == "Start. Done. Lost?"
    code, out, _ = run(capsys, "project", "history", str(path), "--doc", "Chapter")
    assert "interrupted" not in out and "failed" in out


@pytest.mark.parametrize(
    "argv, message, status",
    [
        (["project", "docs", "{dir}/missing.swiftwriter"], "No such project", 1),
        (["project", "docs", "{dir}/missing.swiftwriter", "--json"], "No such project", 1),
        (["project", "docs", "{dir}/text.swiftwriter"], "not an SQLite database", 1),
        (["project", "new", "{dir}/p.swiftwriter"], "already exists", 1),
        (["project", "show", "{dir}/p.swiftwriter", "Nope"], "No document 'Nope'", 1),
        (["project", "import", "{dir}/p.swiftwriter", "{dir}/missing.md"], "No such file", 1),
        (
            ["project", "import", "{dir}/p.swiftwriter", "{dir}/text.swiftwriter"],
            "Cannot import",
            1,
        ),
        (["project", "recover", "{dir}/p.swiftwriter", "7"], "No generation with id 7", 1),
        (["generate", "{dir}/p.swiftwriter"], "needs a DOC", 2),
        (["generate", "{dir}/p.swiftwriter", "9"], "No document '9'", 1),
        (["generate", "{dir}/missing.swiftwriter", "9"], "No such project", 1),
        (["generate"], "give a PROJECT and DOC", 2),
        (["generate", "{dir}/p.swiftwriter", "1", "--prompt-file", "{dir}/x.txt"], "not both", 2),
        (["generate", "--prompt-file", "{dir}/x.txt", "--direction", "on"], "go with a PROJECT", 2),
    ],
)
def test_mistakes_are_one_clear_line(tmp_path, capsys, argv, message, status, monkeypatch):
    (tmp_path / "text.swiftwriter").write_text("plain text", encoding="utf-8")
    Project.create(tmp_path / "p.swiftwriter").close()
    from swiftwriter.modelstore import loader

    monkeypatch.setattr(loader, "load", lambda *a, **k: pytest.fail("loaded a model"))
    code, out, err = run(capsys, *[a.format(dir=tmp_path) for a in argv])
    assert code == status and message in err and len(err.strip().splitlines()) == 1
    assert out == ""


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--project", "{p}", "--doc", "9"], "No document '9'"),
        (["{p}", "--doc", "9"], "No document '9'"),
        (["--project", "{p}", "9"], "No document '9'"),  # with --project the one argument is DOC
        (["--project", "{p}"], "needs a DOC"),
    ],
)
def test_the_old_spelling_of_generate_still_works_and_says_the_new(
    tmp_path, capsys, argv, message, monkeypatch
):
    path = tmp_path / "p.swiftwriter"
    Project.create(path).close()
    from swiftwriter.modelstore import loader

    monkeypatch.setattr(loader, "load", lambda *a, **k: pytest.fail("loaded a model"))
    code, _, err = run(capsys, "generate", *[a.format(p=path) for a in argv])
    lines = err.strip().splitlines()
    assert code in (1, 2) and len(lines) == 2 and message in lines[1]
    assert lines[0] == "swiftwriter: generate --project P --doc D is deprecated: write generate P D"


def test_generate_names_the_project_and_document_once(tmp_path, capsys):
    path = tmp_path / "p.swiftwriter"
    Project.create(path).close()
    for argv in (["--project", str(path), "1", "--doc", "1"], [str(path), "1", "--doc", "1"]):
        code, _, err = run(capsys, "generate", *argv)
        assert code == 2 and "named twice" in err


def test_listings_as_json(tmp_path, capsys):
    path = tmp_path / "N\x1b[2J.swiftwriter"
    with Project.create(path, title="The Keeper", author="A. Writer") as proj:
        top = proj.add_document("Part \u00e9", "", kind="part")
        child = proj.add_document("Chapter\x1b[1m", "one two three", parent_id=top.id)
        done = proj.start_generation(child.id, "p", "tiny", "t")
        done.append(" Done.", [1, 2])
        done.finish("finished", {"tau": 2.5}, append_to_document=True)
        lost = proj.start_generation(child.id, "p", "tiny", "t", flush_interval=0)
        lost.append(" Lost?", [3])
        proj._live.clear()  # as if the process had died here
    code, out, err = run(capsys, "project", "docs", str(path), "--json")
    assert code == 0 and err == "" and "\x1b" not in out
    listing = json.loads(out)
    assert (listing["title"], listing["author"]) == ("The Keeper", "A. Writer")
    assert listing["documents"] == [
        {"id": top.id, "parent_id": None, "depth": 0, "kind": "part", "title": "Part \u00e9",
         "words": 0},
        {"id": child.id, "parent_id": top.id, "depth": 1, "kind": "chapter",
         "title": "Chapter\x1b[1m", "words": 4},
    ]  # fmt: skip
    code, out, err = run(capsys, "project", "history", str(path), "--json")
    rows = json.loads(out)
    assert code == 0 and err == ""
    assert sorted((r["id"], r["status"], r["interrupted"], r["tokens"]) for r in rows) == [
        (done.id, "finished", False, 2),
        (lost.id, "streaming", True, 1),
    ]
    assert {r["document"] for r in rows} == {"Chapter\x1b[1m"}
    assert json.loads(run(capsys, "project", "backups", str(path), "--json")[1]) == []
    assert run(capsys, "project", "backup", str(path))[0] == 0
    code, out, err = run(capsys, "project", "backups", str(path), "--json")
    (backup,) = json.loads(out)
    assert code == 0 and err == "" and backup["checksum_ok"] is True and backup["bytes"] > 0


def test_import_takes_several_files_all_or_none(tmp_path, capsys):
    path = tmp_path / "Novel.swiftwriter"
    Project.create(path).close()
    (tmp_path / "one.md").write_text("# One\n\nFirst.\n", encoding="utf-8")
    (tmp_path / "two.txt").write_text("Second text.\n", encoding="utf-8")
    (tmp_path / "bad.txt").write_bytes(b"caf\xe9")
    files = [str(tmp_path / name) for name in ("one.md", "two.txt")]
    code, _, err = run(capsys, "project", "import", str(path), *files, str(tmp_path / "bad.txt"))
    assert code == 1 and "not UTF-8" in err
    with Project.open(path, readonly=True) as proj:
        assert proj.documents() == []
    code, out, _ = run(capsys, "project", "import", str(path), *files)
    assert code == 0 and "Imported 2 document(s), 3 words, from 2 files" in out
    with Project.open(path, readonly=True) as proj:
        assert [d.title for d in proj.documents()] == ["One", "two"]


def test_generate_into_a_project_document(tmp_path, capsys, monkeypatch):
    """The CLI path end to end, with a tiny model standing in for the registry's."""
    path = tmp_path / "p.swiftwriter"
    with Project.create(path) as proj:
        doc = proj.add_document("Chapter 1", "The keeper climbed the stairs")
    fake = SimpleNamespace(
        model=build_tiny("llama", seed=7),
        tokenizer=Latin1Tokenizer(),
        entry=SimpleNamespace(id="tiny-test"),
    )
    from swiftwriter.modelstore import loader, registry

    monkeypatch.setattr(registry, "resolve", lambda name: SimpleNamespace(id="tiny-test"))
    monkeypatch.setattr(loader, "load", lambda entry, device, dtype: fake)
    argv = ["generate", str(path), "chapter 1", "--max-new-tokens", "12", "--preset", "precise"]
    code, out, err = run(capsys, *argv)
    assert code == 0 and "generation #1: " in err and "appended to 'Chapter 1'" in err
    assert "deprecated" not in err
    with Project.open(path, readonly=True) as proj:
        (gen,) = proj.generations()
        assert gen.model_id == "tiny-test" and gen.status == "finished" and gen.n_tokens >= 1
        assert proj.document(doc.id).text == "The keeper climbed the stairs" + gen.text
        assert out.rstrip("\n") == gen.text.rstrip("\n")


def test_imported_levels_become_kinds_under_a_parent(tmp_path):
    with Project.create(tmp_path / "p.swiftwriter") as proj:
        top = proj.add_document("Report", kind="document")
        added = import_sections(proj, [(2, "A", "a"), (3, "A.1", "x"), (4, "A.1.1", "y")], top.id)
        assert [(d.kind, d.parent_id) for d in added] == [
            ("part", top.id),
            ("chapter", added[0].id),
            ("scene", added[1].id),
        ]
        with pytest.raises(Exception, match="Nothing to import"):
            import_sections(proj, [])

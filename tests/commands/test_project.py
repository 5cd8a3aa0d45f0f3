"""`swiftwriter project ...` and `swiftwriter generate --project`: headless use of a project, and
one clear line (exit 2) for every mistake."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from swiftwriter.cli import main
from swiftwriter.store import Project
from swiftwriter.store.importing import import_sections

from tests.conftest import build_tiny
from tests.test_session import Latin1Tokenizer

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
    "argv, message",
    [
        (["project", "docs", "{dir}/missing.swiftwriter"], "No such project"),
        (["project", "docs", "{dir}/text.swiftwriter"], "not an SQLite database"),
        (["project", "new", "{dir}/p.swiftwriter"], "already exists"),
        (["project", "show", "{dir}/p.swiftwriter", "Nope"], "No document 'Nope'"),
        (["project", "import", "{dir}/p.swiftwriter", "{dir}/missing.md"], "No such file"),
        (["project", "import", "{dir}/p.swiftwriter", "{dir}/text.swiftwriter"], "Cannot import"),
        (["project", "recover", "{dir}/p.swiftwriter", "7"], "No generation with id 7"),
        (["generate", "--project", "{dir}/p.swiftwriter"], "needs --doc"),
        (["generate", "--project", "{dir}/p.swiftwriter", "--doc", "9"], "No document '9'"),
        (["generate", "--prompt-file", "{dir}/x.txt", "--doc", "1"], "goes with --project"),
    ],
)
def test_mistakes_are_one_clear_line(tmp_path, capsys, argv, message, monkeypatch):
    (tmp_path / "text.swiftwriter").write_text("plain text", encoding="utf-8")
    Project.create(tmp_path / "p.swiftwriter").close()
    from swiftwriter.modelstore import loader

    monkeypatch.setattr(loader, "load", lambda *a, **k: pytest.fail("loaded a model"))
    code, out, err = run(capsys, *[a.format(dir=tmp_path) for a in argv])
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


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
    argv = ["generate", "--project", str(path), "--doc", "chapter 1", "--max-new-tokens", "12"]
    code, out, err = run(capsys, *argv)
    assert code == 0 and "generation #1: " in err and "appended to 'Chapter 1'" in err
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

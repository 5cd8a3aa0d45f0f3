"""Documents, snapshots, notes and metadata: the everyday operations, and refusals that change
nothing."""

from __future__ import annotations

import pytest
from swiftwriter.errors import UserError
from swiftwriter.store import Project, ProjectError, schema

from .conftest import file_digest


def tree(proj):
    return [(d.depth, d.title) for d in proj.documents()]


def test_create_sets_meta_and_refuses_an_existing_path(project, project_path):
    assert project.meta["title"] == "My novel" and project.meta["author"] == "A. Writer"
    assert not project.readonly and project.schema_version() == schema.SCHEMA_VERSION
    names = {p.name for p in project_path.parent.iterdir()}
    assert {"Novel.swiftwriter", "Novel.swiftwriter.lock"} <= names
    assert not any(name.endswith(".creating") for name in names)  # made aside, then named
    with pytest.raises(ProjectError, match="already exists"):
        Project.create(project_path)
    with pytest.raises(ProjectError, match="No such folder"):
        Project.create(project_path.parent / "missing" / "x.swiftwriter")
    project.update_meta(title="Renamed")
    assert project.meta["title"] == "Renamed"
    # a project error is a user error: the CLI shows it as one line
    assert issubclass(ProjectError, UserError)


def test_tree_is_depth_first_and_moves_keep_it_consistent(project):
    part = project.add_document("Part 1", kind="part")
    c1 = project.add_document("Chapter 1", "one", parent_id=part.id)
    c2 = project.add_document("Chapter 2", "two", parent_id=part.id)
    c0 = project.add_document("Prologue", parent_id=part.id, position=0)
    scene = project.add_document("Scene", "s", parent_id=c1.id, kind="scene")
    appendix = project.add_document("Appendix", kind="section")
    assert tree(project) == [
        (0, "Part 1"),
        (1, "Prologue"),
        (1, "Chapter 1"),
        (2, "Scene"),
        (1, "Chapter 2"),
        (0, "Appendix"),
    ]
    assert project.document(scene.id).depth == 2
    project.move(c2.id, part.id, 0)
    project.move(c1.id, None, 1)  # with its scene, between Part 1 and Appendix
    assert tree(project) == [
        (0, "Part 1"),
        (1, "Chapter 2"),
        (1, "Prologue"),
        (0, "Chapter 1"),
        (1, "Scene"),
        (0, "Appendix"),
    ]
    positions = {d.title: d.position for d in project.documents()}
    assert positions["Chapter 2"] == 0 and positions["Prologue"] == 1
    assert positions["Appendix"] == 2
    with pytest.raises(ProjectError, match="inside itself"):
        project.move(c1.id, scene.id)
    with pytest.raises(ProjectError, match="out of range"):
        project.move(c0.id, part.id, 5)
    assert appendix.kind == "section"


def test_bad_input_is_refused_and_changes_nothing(project, project_path):
    doc = project.add_document("Chapter", "text")
    before = project.documents()
    cases = [
        (lambda: project.update_text(999, "x"), "No document with id 999"),
        (lambda: project.update_text(doc.id, None), "must be text"),
        (lambda: project.add_document("   "), "needs a title"),
        (lambda: project.add_document("x", kind="novel"), "Unknown document kind"),
        (lambda: project.add_document("x", parent_id=0), "positive whole number"),
        (lambda: project.add_document("x", position=-1), "out of range"),
        (lambda: project.add_document("x", position=True), "whole number"),
        (lambda: project.rename(True, "x"), "positive whole number"),
        (lambda: project.move(doc.id, 12345), "No document with id 12345"),
        (lambda: project.restore_snapshot(77), "No snapshot with id 77"),
        (lambda: project.update_note(3, text="x"), "No note with id 3"),
        (lambda: project.add_document("x" * 1001), "at most 1000"),
    ]
    for action, message in cases:
        with pytest.raises(ProjectError, match=message):
            action()
    assert project.documents() == before
    # a failing step inside a batch rolls the whole batch back
    with pytest.raises(ProjectError), project.batch():
        project.add_document("Kept?")
        project.update_text(424242, "boom")
    assert project.documents() == before
    project.close()
    with pytest.raises(ProjectError, match="closed"):
        project.documents()


def test_delete_moves_a_subtree_to_the_trash_and_back(project):
    part = project.add_document("Part", kind="part")
    ch = project.add_document("Chapter", "words", parent_id=part.id)
    other = project.add_document("Other")
    project.delete(part.id)
    assert tree(project) == [(0, "Other")]
    assert [d.title for d in project.trash()] == ["Part"]  # its chapter comes back with it
    with pytest.raises(ProjectError, match="No document"):
        project.update_text(ch.id, "x")
    project.undelete(part.id)
    assert tree(project) == [(0, "Other"), (0, "Part"), (1, "Chapter")]
    assert project.document(ch.id).text == "words"
    assert project.document(other.id).position == 0
    with pytest.raises(ProjectError, match="not in the trash"):
        project.undelete(part.id)


def test_snapshots_and_restore_never_lose_the_replaced_text(project):
    doc = project.add_document("Chapter", "first draft")
    first = project.snapshot(doc.id)
    assert project.snapshot(doc.id, reason="again") == first  # unchanged: no duplicate
    project.update_text(doc.id, "second draft")
    second = project.snapshot(doc.id, reason="milestone")
    project.update_text(doc.id, "third draft, unsaved in any snapshot")
    restored = project.restore_snapshot(first)
    assert restored.text == "first draft"
    snaps = project.snapshots(doc.id)
    assert [s.text for s in snaps] == [
        "third draft, unsaved in any snapshot",
        "second draft",
        "first draft",
    ]
    assert snaps[0].reason == f"before restoring snapshot {first}" and snaps[1].id == second


def test_notes_and_pinned_notes(project):
    cast = project.add_note("Cast", "Margaret, the lighthouse keeper", pinned=True)
    project.add_note("Ideas", "a storm in chapter 9")
    outline = project.add_note("Outline", "1. the boat")
    assert [n.title for n in project.notes()] == ["Cast", "Ideas", "Outline"]
    project.update_note(outline.id, pinned=True, text="1. the boat\n2. the storm")
    assert [n.title for n in project.pinned_notes()] == ["Cast", "Outline"]
    assert project.note(outline.id).text.endswith("the storm")
    project.delete_note(cast.id)
    assert [n.title for n in project.pinned_notes()] == ["Outline"]


def test_read_only_view_refuses_writes_and_leaves_the_file_alone(project, project_path):
    doc = project.add_document("Chapter", "text")
    project.close()
    digest = file_digest(project_path)
    with Project.open(project_path, readonly=True) as view:
        assert view.readonly and view.documents()[0].text == "text"
        for action in (
            lambda: view.update_text(doc.id, "changed"),
            lambda: view.add_note("n"),
            lambda: view.snapshot(doc.id),
            lambda: view.start_generation(doc.id, "h", "m", "t"),
        ):
            with pytest.raises(ProjectError, match="read-only"):
                action()
    assert file_digest(project_path) == digest
    with Project.open(project_path) as proj:
        assert proj.document(doc.id).text == "text"


def test_the_store_and_its_cli_never_import_torch_or_qt():
    import subprocess
    import sys

    code = (
        "import sys, swiftwriter.store, swiftwriter.store.importing, swiftwriter.commands.project\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('torch', 'PySide6', 'transformers')]\n"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_hostile_tree_lists_without_recursion_and_breaks_cycles(project, project_path, caplog):
    """A file nesting 3,000 deep, holding a parent cycle (a -> b -> a) and a parent it lost:
    every document is listed once, the cycle's lowest id at the top level, said once in the
    log; one document read alone has the depth the tree shows."""
    import sqlite3

    a = project.add_document("A", "alpha")
    b = project.add_document("B", "beta", parent_id=a.id)
    below = project.add_document("Below B", "gamma", parent_id=b.id)
    project.close()
    conn = sqlite3.connect(project_path)
    conn.execute("UPDATE documents SET parent_id = ? WHERE id = ?", [b.id, a.id])
    conn.executemany(
        "INSERT INTO documents (id, parent_id, kind, title, text, position) "
        "VALUES (?, ?, 'section', ?, '', 0)",
        [(100 + i, 99 + i if i else None, f"Level {i}") for i in range(3000)]
        + [(5000, 99999, "Below a lost parent"), (5001, 5000, "Its child")],
    )
    conn.commit()
    conn.close()
    with Project.open(project_path, readonly=True) as view:
        docs = view.documents()
        view.documents()
        by_id = {d.id: d for d in docs}
        assert len(docs) == len(by_id) == 3005
        assert (by_id[a.id].depth, by_id[a.id].parent_id) == (0, None)
        assert (by_id[b.id].depth, by_id[below.id].depth, by_id[3099].depth) == (1, 2, 2999)
        assert view.document(b.id).depth == 1 and view.document(3099).depth == 2999
        assert view.document(a.id).parent_id is None
        for lost in (5000, 5001):  # under a parent the file no longer holds: as the tree shows
            assert view.document(lost).depth == by_id[lost].depth
    assert sum("parent cycle" in r.getMessage() for r in caplog.records) == 1

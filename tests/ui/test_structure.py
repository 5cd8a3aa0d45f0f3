"""Structure: a document's kind is set in the tree (context menu, the Kind column), "Add inside"
a chapter makes a scene (which exports as a scene), and the Outline edits titles, kinds,
synopses and statuses in place."""

from __future__ import annotations

from swiftwriter.export.docx_out import build_document
from swiftwriter.export.markdown_out import render_markdown
from swiftwriter.export.model import manuscript_from_project
from swiftwriter.store import planning
from swiftwriter.ui.outline import KIND, STATUS, SYNOPSIS, TITLE, WORDS


def kinds(window):
    return [(d.title, d.kind, d.depth) for d in window.project.documents()]


def test_add_inside_a_chapter_makes_a_scene_that_exports_as_one(qtbot, window, make_project):
    window.projects.open_project(make_project(docs=(("Chapter 1", "The sea was grey."),)))
    tree = window.tree
    scene = tree.add_document(child=True)
    window.project.update_text(scene, "Later, the wind.")
    tree.add_document()  # after a scene: another scene
    tree.select(window.project.documents()[0].id)
    tree.add_document()  # after the chapter: a chapter
    assert kinds(window) == [
        ("Chapter 1", "chapter", 0),
        ("New scene", "scene", 1),
        ("New scene", "scene", 1),
        ("New chapter", "chapter", 0),
    ]
    item = tree.tree.topLevelItem(0).child(0)
    assert item.text(1) == "scene"  # the Kind column
    manuscript = manuscript_from_project(window.project)
    assert [(s.kind, s.level) for s in manuscript.sections][:2] == [("chapter", 1), ("scene", 2)]
    report = render_markdown(manuscript, style="report")
    assert "## New scene" in report  # under the chapter, not beside it
    novel = build_document(manuscript, style="novel")  # a novel's scene: a break, no heading
    styles = [(p.style.name, p.text) for p in novel.paragraphs]
    assert ("Heading 2", "New scene") not in styles and ("Heading 1", "Chapter 1") in styles
    assert any(name == "Scene Break" for name, _ in styles)


def test_the_kind_is_set_from_the_tree(qtbot, window, make_project):
    window.projects.open_project(make_project(docs=(("One", "a"), ("Two", "b"))))
    tree = window.tree
    two = tree.ids_in_order()[1]
    tree.set_kind(two, "part")
    assert window.project.document(two).kind == "part"
    item = tree.tree.topLevelItem(1)
    item.setText(1, "Scene")  # typed into the Kind column
    qtbot.waitUntil(lambda: window.project.document(two).kind == "scene")
    tree.tree.topLevelItem(1).setText(1, "epilogue")  # not a kind: the old one comes back
    qtbot.waitUntil(lambda: tree.tree.topLevelItem(1).text(1) == "scene")


def test_outline_edits_in_place(qtbot, window, make_project):
    window.projects.open_project(make_project(docs=(("One", "one two three"), ("Two", "four"))))
    outline = window.actions_by_name["outline"].trigger() or window.open_dialogs[-1]
    table = outline.table
    assert [table.item(r, TITLE).text() for r in range(2)] == ["One", "Two"]
    assert [table.item(r, WORDS).text() for r in range(2)] == ["3", "1"]
    two = outline.doc_id(1)
    table.item(1, TITLE).setText("The Second")
    table.item(1, SYNOPSIS).setText("Elena reads the letter.")
    table.cellWidget(1, KIND).setCurrentText("part")
    table.cellWidget(1, STATUS).setCurrentText("revised")
    doc = window.project.document(two)
    assert (doc.title, doc.synopsis, doc.kind) == ("The Second", "Elena reads the letter.", "part")
    assert planning.statuses(window.project) == {two: "revised"}
    assert window.tree.tree.topLevelItem(1).text(0) == "The Second"  # the tree follows
    outline.close()


def test_the_outline_goes_with_its_project(qtbot, window, make_project):
    first = make_project("First", docs=(("One", "a"), ("Two", "b")))
    second = make_project("Second", docs=(("Uno", "c"), ("Dos", "d")))
    window.projects.open_project(first)
    outline = window.open_outline()
    doc_id = outline.doc_id(1)
    window.projects.close_project()
    assert not outline.isVisible() and outline not in window.open_dialogs
    window.projects.open_project(second)
    outline._set_status(doc_id, "final")  # a late edit must not land in another project
    outline._set_kind(doc_id, "part")
    assert planning.statuses(window.project) == {}
    assert [d.kind for d in window.project.documents()] == ["chapter", "chapter"]


def test_a_chapters_outline_row_counts_its_scenes(qtbot, window, tmp_path):
    """A chapter whose text is all in its scenes showed 0 words in the Outline (issue 63)."""
    from swiftwriter.store import Project

    path = tmp_path / "Scenes.swiftwriter"
    with Project.create(path, title="Scenes") as project:
        part = project.add_document("Part One", "", kind="part")
        chapter = project.add_document("Chapter 1", "Dawn.", parent_id=part.id, kind="chapter")
        for text in ("The boat came in.", "Elena waited on the wall."):
            project.add_document("Scene", text, parent_id=chapter.id, kind="scene")
        project.add_document("Chapter 2", "one two", parent_id=part.id, kind="chapter")
    window.projects.open_project(path)
    outline = window.open_outline()
    words = [outline.table.item(r, WORDS).text() for r in range(outline.table.rowCount())]
    assert words == ["12", "10", "4", "5", "2"]  # part, chapter 1 with its scenes, ...
    outline.close()

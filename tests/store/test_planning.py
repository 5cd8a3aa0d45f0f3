"""Word targets in the project file: set, read back, removed with 0, nonsense refused, a
damaged value read as no target."""

from __future__ import annotations

import pytest
from swiftwriter.store import Project, planning
from swiftwriter.store.records import ProjectError


def test_targets_live_in_the_project_and_refuse_nonsense(tmp_path):
    path = tmp_path / "t.swiftwriter"
    with Project.create(path, title="T") as project:
        doc = project.add_document("One", "a b c").id
        planning.set_project_target(project, 80000)
        planning.set_document_target(project, doc, 3000)
        for bad in (-1, "many", planning.MAX_TARGET + 1):
            with pytest.raises(ProjectError):
                planning.set_project_target(project, bad)
    with Project.open(path) as project:
        assert planning.project_target(project) == 80000
        assert planning.document_targets(project) == {doc: 3000}
        planning.set_document_target(project, doc, 0)  # 0 removes it
        assert planning.document_targets(project) == {}
        project.update_meta(word_target="garbage", document_targets="{not json")
        assert planning.project_target(project) == 0 and planning.document_targets(project) == {}


def test_kinds_and_statuses(tmp_path):
    with Project.create(tmp_path / "k.swiftwriter", title="K") as project:
        chapter = project.add_document("One").id
        project.set_kind(chapter, "scene")
        assert project.document(chapter).kind == "scene"
        with pytest.raises(ProjectError, match="Unknown document kind"):
            project.set_kind(chapter, "epilogue")
        planning.set_status(project, chapter, "revised")
        assert planning.statuses(project) == {chapter: "revised"}
        with pytest.raises(ProjectError, match="Unknown status"):
            planning.set_status(project, chapter, "done-ish")
        planning.set_status(project, chapter, "")
        assert planning.statuses(project) == {}


def test_words_with_what_is_below_add_up_the_tree(tmp_path):
    with Project.create(tmp_path / "w.swiftwriter", title="W") as project:
        part = project.add_document("Part", "a", kind="part")
        chapter = project.add_document("Ch", "b c", parent_id=part.id, kind="chapter")
        scene = project.add_document("Sc", "d e f", parent_id=chapter.id, kind="scene")
        alone = project.add_document("Alone", "g")
        totals = planning.words_with_what_is_below(project.documents())
    assert totals == {part.id: 6, chapter.id: 5, scene.id: 3, alone.id: 1}

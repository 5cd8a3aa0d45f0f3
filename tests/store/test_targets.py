"""Word targets in the project file: set, read back, removed with 0, nonsense refused, a
damaged value read as no target."""

from __future__ import annotations

import pytest
from swiftwriter.store import Project, targets
from swiftwriter.store.records import ProjectError


def test_targets_live_in_the_project_and_refuse_nonsense(tmp_path):
    path = tmp_path / "t.swiftwriter"
    with Project.create(path, title="T") as project:
        doc = project.add_document("One", "a b c").id
        targets.set_project_target(project, 80000)
        targets.set_document_target(project, doc, 3000)
        for bad in (-1, "many", targets.MAX_TARGET + 1):
            with pytest.raises(ProjectError):
                targets.set_project_target(project, bad)
    with Project.open(path) as project:
        assert targets.project_target(project) == 80000
        assert targets.document_targets(project) == {doc: 3000}
        targets.set_document_target(project, doc, 0)  # 0 removes it
        assert targets.document_targets(project) == {}
        project.update_meta(word_target="garbage", document_targets="{not json")
        assert targets.project_target(project) == 0 and targets.document_targets(project) == {}

"""The store says in the log what a bug report needs: which file was opened, how, each save
and each backup (debug lines of the store's own loggers)."""

from __future__ import annotations

import logging

from swiftwriter.store import Project


def test_open_save_backup_and_close_are_logged(project_path, caplog):
    caplog.set_level(logging.DEBUG, logger="swiftwriter.store")
    with Project.create(project_path, title="Logged") as project:
        doc = project.add_document("One", "Some text.")
        project.update_text(doc.id, "Some more text.")
        project.backup()
    with Project.open(project_path, readonly=True):
        pass
    lines = [(r.name, r.getMessage()) for r in caplog.records]
    said = "\n".join(f"{name}: {message}" for name, message in lines)
    assert f"swiftwriter.store.project: created {project_path}" in said
    assert "swiftwriter.store.project: opened" in said and "for writing (format" in said
    assert f"saved document {doc.id} of {project_path.name} (15 characters)" in said
    assert "swiftwriter.store.backups: backed up" in said
    assert "read-only (format" in said and said.count("closed") == 2

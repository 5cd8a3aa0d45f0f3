"""Fault matrix rows: an export aimed at the project under another spelling, registry ids that
are paths, a symlinked registry, the lock under another spelling, a full disk and a hot
rollback journal (shared checks in `common.py`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from swiftwriter.store import Project

from tests.fault_matrix.common import BASE, CLI, check_project, digest, one_line


def _files(folder: Path) -> dict[str, str]:
    """Every file under `folder` with its digest (links by their target), to compare later."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            out[str(path.relative_to(folder))] = "-> " + os.readlink(path)
        elif path.is_file():
            out[str(path.relative_to(folder))] = digest(path)
    return out


# -- an export never replaces the project or a file kept beside it ----------------------------
def _spell(project: Path, how: str, cwd: Path) -> str:
    if how == "relative":
        return os.path.relpath(project, cwd)
    if how == "dotdot":
        return str(project.parent / "sub" / ".." / project.name)
    if how == "symlink":
        link = project.parent / "link.md"
        link.symlink_to(project)
        return str(link)
    if how == "hardlink":
        other = project.parent / "other" / "Novel.md"
        other.parent.mkdir()
        os.link(project, other)
        return str(other)
    return str(project)


@pytest.mark.parametrize("how", ["plain", "relative", "dotdot", "symlink", "hardlink"])
def test_export_over_the_project_is_refused(project, env, tmp_path, how):
    (project.parent / "sub").mkdir()
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    target = _spell(project, how, cwd)
    before = digest(project)
    result = subprocess.run([*CLI, "export", str(project), "--format", "md", "--out", target],
                            env=env, cwd=cwd, capture_output=True, text=True, timeout=60)  # fmt: skip
    one_line(result, "the project")
    assert digest(project) == before
    check_project(project, [BASE])


def _beside(project: Path) -> dict[str, tuple]:
    """The project's folder: each file's identity, and its bytes but for `-shm` (a reader's
    marks change it)."""
    return {
        p.name: (p.stat().st_ino, "" if p.name.endswith("-shm") else digest(p))
        for p in project.parent.iterdir()
        if p.is_file() and not p.is_symlink()
    }


@pytest.mark.parametrize(
    "suffix, how",
    [(s, h) for s in ("-wal", "-shm", "-journal", ".lock") for h in ("plain", "symlink", "hardlink")
     if (s, h) != ("-journal", "hardlink")],  # WAL mode keeps no -journal to link to
)  # fmt: skip
def test_export_over_a_file_beside_the_project_is_refused(project, env, tmp_path, suffix, how):
    companion = Path(f"{project}{suffix}")
    with Project.open(project) as held:  # the writer has it open: -wal, -shm and .lock exist
        held.add_document("Chapter 2", "Written while the export ran.")
        target = companion
        if how == "symlink":
            target = tmp_path / "link.md"
            target.symlink_to(companion)
        elif how == "hardlink":
            target = tmp_path / "other" / "Novel.md"
            target.parent.mkdir()
            os.link(companion, target)
        before = _beside(project)
        result = subprocess.run([*CLI, "export", str(project), "--out", str(target), "--format",
                                 "md"], env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
        one_line(result, "kept beside the project")
        assert _beside(project) == before
        assert companion.exists() == (suffix != "-journal")
        held.add_document("Chapter 3", "Saved after the refused export.")
    check_project(project, [BASE, "Written while", "Saved after"])

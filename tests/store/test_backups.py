"""Rolling backups outside the live file: consistent copies while the project is open,
thinned by age, listed, restored as a new project; a warning for synced and network folders."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest
from swiftwriter.cli import main
from swiftwriter.store import Project, ProjectError, backups


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SWIFTWRITER_DATA_DIR", str(tmp_path / "data"))


def test_a_backup_is_a_consistent_copy_outside_the_project_folder(project, project_path):
    doc = project.add_document("Chapter 1", "The first line.")
    made = project.backup()
    assert made.path.is_relative_to(backups.backups_root())  # not beside the project
    assert made.path.parent == backups.folder_for(project_path)
    project.update_text(doc.id, "Changed after the backup.")
    with Project.open(made.path, readonly=True) as copy:
        assert copy.document(doc.id).text == "The first line."
        assert copy.integrity_check() == "ok"
    assert not list(made.path.parent.glob("*-wal"))  # one self-contained file


def test_restore_makes_a_new_project_and_never_overwrites(project, project_path, tmp_path):
    project.add_document("Chapter 1", "Kept safe.")
    made = project.backup()
    new = tmp_path / "Restored.swiftwriter"
    backups.restore(made.path, new)
    with Project.open(new) as restored:  # writable, with its own lock
        assert restored.documents()[0].title == "Chapter 1"
    with pytest.raises(ProjectError, match="already exists"):
        backups.restore(made.path, project_path)
    broken = tmp_path / "broken.swiftwriter"
    broken.write_bytes(b"not a database")
    with pytest.raises(ProjectError):
        backups.restore(broken, tmp_path / "x.swiftwriter")


def touch_backup(folder, when: datetime):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{when.strftime(backups.STAMP)}{backups.SUFFIX}"
    path.write_bytes(b"")
    return path


def test_thinning_keeps_the_newest_and_one_a_day_for_a_month(tmp_path):
    folder = tmp_path / "b"
    now = datetime(2026, 12, 1, 12, 0, 0)
    recent = [touch_backup(folder, now - timedelta(minutes=5 * i)) for i in range(12)]
    day2 = [touch_backup(folder, now - timedelta(days=2, hours=h)) for h in (1, 2, 3)]
    ancient = touch_backup(folder, now - timedelta(days=40))
    removed = set(backups.thin(folder, now))
    assert all(p.exists() for p in recent[:10])
    assert set(recent[10:]) <= removed  # same day as the ten newest
    assert day2[0].exists() and not day2[1].exists() and not day2[2].exists()
    assert ancient in removed


def test_cli_lists_and_restores_backups(project, project_path, tmp_path, capsys):
    project.add_document("Chapter 1", "Text.")
    project.close()
    assert main(["project", "backups", str(project_path)]) == 0
    assert "No backups" in capsys.readouterr().out
    assert main(["project", "backup", str(project_path)]) == 0
    time.sleep(1.01)  # backups are named by the second
    assert main(["project", "backup", str(project_path)]) == 0
    capsys.readouterr()
    assert main(["project", "backups", str(project_path)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[0] > lines[1]  # newest first
    newest = lines[0].split()[-1]
    new = tmp_path / "Again.swiftwriter"
    assert main(["project", "restore", newest, str(new)]) == 0
    assert main(["project", "restore", newest, str(new)]) == 2
    assert "already exists" in capsys.readouterr().err


def test_synced_and_network_folders_are_named(tmp_path):
    synced = tmp_path / "Dropbox" / "Novel.swiftwriter"
    assert "cloud-sync" in backups.location_warning(synced, mounts="")
    mounts = f"server:/export {tmp_path}/net nfs4 rw 0 0\n/dev/sda1 / ext4 rw 0 0\n"
    assert "nfs4" in backups.location_warning(tmp_path / "net" / "N.swiftwriter", mounts)
    assert backups.location_warning(tmp_path / "local" / "N.swiftwriter", mounts) == ""

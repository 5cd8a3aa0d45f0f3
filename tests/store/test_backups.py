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
    assert ancient.exists()  # fewer than KEEP_DAYS days have backups: its day is still counted


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
    assert main(["project", "restore", newest, str(new)]) == 1
    assert "already exists" in capsys.readouterr().err


def test_synced_and_network_folders_are_named(tmp_path):
    synced = tmp_path / "Dropbox" / "Novel.swiftwriter"
    assert "cloud-sync" in backups.location_warning(synced, mounts="")
    mounts = f"server:/export {tmp_path}/net nfs4 rw 0 0\n/dev/sda1 / ext4 rw 0 0\n"
    assert "nfs4" in backups.location_warning(tmp_path / "net" / "N.swiftwriter", mounts)
    assert backups.location_warning(tmp_path / "local" / "N.swiftwriter", mounts) == ""


def test_a_clock_a_year_fast_never_thins_the_daily_backups(tmp_path):
    """A backup made (or a thinning run) with the clock a year fast makes every other backup
    look a year old: the dailies are counted by the days that have backups, never by age."""
    folder = tmp_path / "b"
    now = datetime(2026, 12, 1, 12, 0, 0)
    recent = [touch_backup(folder, now - timedelta(minutes=5 * i)) for i in range(10)]
    dailies = [touch_backup(folder, now - timedelta(days=d)) for d in range(1, 21)]
    fast = now + timedelta(days=365)
    touch_backup(folder, fast)
    assert len(backups.thin(folder, fast)) <= 1  # the newest ten count the fast one
    assert backups.thin(folder, now) == []
    assert all(p.exists() for p in recent[:9] + dailies)
    # The clock set right again: the future-dated backup is kept but holds no one's place.
    for i in range(1, 4):
        touch_backup(folder, now + timedelta(minutes=i))
    backups.thin(folder, now + timedelta(minutes=4))
    assert all(p.exists() for p in recent[:7] + dailies)
    assert not any(p.exists() for p in recent[7:])


def test_dailies_are_kept_for_the_thirty_latest_days_with_backups(tmp_path):
    folder = tmp_path / "b"
    now = datetime(2026, 12, 1, 12, 0, 0)
    days = [touch_backup(folder, now - timedelta(days=3 * d)) for d in range(45)]
    removed = set(backups.thin(folder, now))
    assert all(p.exists() for p in days[: backups.KEEP_DAYS])  # the newest ten among them
    assert removed == set(days[backups.KEEP_DAYS :])


def test_a_damaged_backup_is_marked_and_never_restored(project, project_path, tmp_path, capsys):
    """Bytes changed inside a record pass SQLite's checks: the checksum recorded when the backup
    was made catches them."""
    project.add_document("Chapter 1", "Kept safe in the backup.")
    made = project.backup()
    data = made.path.read_bytes()
    made.path.write_bytes(data.replace(b"Kept safe", b"Kept SAFE"))
    with pytest.raises(ProjectError, match="checksum"):
        backups.restore(made.path, tmp_path / "Restored.swiftwriter")
    assert not (tmp_path / "Restored.swiftwriter").exists()
    assert backups.verify(made.path) is False
    made.path.write_bytes(data)
    assert backups.verify(made.path) is True
    made.path.write_bytes(data.replace(b"Kept safe", b"Kept SAFE"))
    project.close()
    assert main(["project", "backups", str(project_path)]) == 0
    assert "DAMAGED" in capsys.readouterr().out


def test_restore_without_hard_links_renames_into_place(project, tmp_path, monkeypatch):
    import errno
    import os

    project.add_document("Chapter 1", "Restored without links.")
    made = project.backup()

    def no_links(*args, **kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    new = tmp_path / "Restored.swiftwriter"
    backups.restore(made.path, new)
    with Project.open(new) as restored:
        assert restored.documents()[0].text == "Restored without links."
    with pytest.raises(ProjectError, match="already exists"):
        backups.restore(made.path, new)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_restore_never_writes_through_a_planted_link_and_clears_stale_partials(project, tmp_path):
    project.add_document("Chapter 1", "Text.")
    made = project.backup()
    victim = tmp_path / "victim.db"
    victim.write_bytes(b"")  # an empty file SQLite would happily fill
    new = tmp_path / "New.swiftwriter"
    planted = tmp_path / f".{new.name}.restoring"
    planted.symlink_to(victim)
    stale = tmp_path / ".Older.swiftwriter.x1y2z3.restoring"
    stale.write_bytes(b"\0" * 4096)  # left by a restore killed earlier (nobody holds it)
    backups.restore(made.path, new)
    assert victim.read_bytes() == b""
    assert not stale.exists() and not planted.is_symlink()
    with Project.open(new) as restored:
        assert restored.documents()[0].text == "Text."

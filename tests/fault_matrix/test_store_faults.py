"""Fault matrix rows for the store: hostile project files (deep trees, parent cycles, stored
settings out of range, planted triggers), backups and restores killed or planted with links,
file systems without hard links, damaged backups, a clock a year fast and a killed migration
(shared checks in `common.py`)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

from swiftwriter.store import Project
from swiftwriter.store import backups as backups_mod

from tests.fault_matrix.common import BASE, CLI, check_project, digest, kill_when, one_line
from tests.store.conftest import FORMAT_1_SQL

DEEP = 3000


def _hostile_tree(project) -> None:
    """A 3,000-deep chain, a parent cycle and panel settings out of every range."""
    with Project.open(project) as p:
        a = p.add_document("Cycle A", "alpha")
        b = p.add_document("Cycle B", "beta", parent_id=a.id)
        settings = {"length": 1e300, "temperature": float("nan"), "top_k": 10**30, "seed": -1}
        p.update_meta(generation_settings=json.dumps(settings))
    conn = sqlite3.connect(project)
    conn.execute("UPDATE documents SET parent_id = ? WHERE id = ?", [b.id, a.id])
    conn.executemany(
        "INSERT INTO documents (id, parent_id, kind, title, text, position) "
        "VALUES (?, ?, 'section', ?, 'deep', 0)",
        [(100 + i, 99 + i if i else None, f"Level {i}") for i in range(DEEP)],
    )
    conn.commit()
    conn.close()


WINDOW = """
import sys
from PySide6.QtWidgets import QApplication
app = QApplication([])
from swiftwriter.ui.main_window import MainWindow
window = MainWindow(load_model=False)
window.ask = lambda title, text: True
assert window.projects.open_project(sys.argv[1])
window.show()
app.processEvents()
print(len(window.tree.ids_in_order()), window.panel.length.value() <= window.panel.length.maximum())
window.projects.close_project()
"""


def test_hostile_tree_and_settings(project, env, tmp_path):
    _hostile_tree(project)
    before = digest(project)
    listed = subprocess.run([*CLI, "project", "docs", str(project)], env=env,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert listed.stdout.count("\n") == 1 + 1 + 2 + DEEP  # title, chapter, the cycle, the chain
    assert "Cycle A" in listed.stdout and f"Level {DEEP - 1}" in listed.stdout
    assert listed.stderr.count("parent cycle") <= 1
    out = tmp_path / "book.md"
    exported = subprocess.run([*CLI, "export", str(project), "--out", str(out)], env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    assert exported.returncode == 0 and "Traceback" not in exported.stderr, exported.stderr
    assert "Cycle B" in out.read_text(encoding="utf-8")
    assert digest(project) == before  # listing and export read only
    window = subprocess.run([sys.executable, "-c", WINDOW, str(project)],
                            env={**env, "QT_QPA_PLATFORM": "offscreen"},
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert window.returncode == 0, window.stderr[-2000:]
    assert window.stdout.split() == [str(DEEP + 3), "True"]
    check_project(project, [BASE, "alpha", "beta"])


def _cli(env, *args, code: str = "") -> subprocess.CompletedProcess:
    """The CLI in a child, after `code` (a fault planted in that process)."""
    run = f"import sys\n{code}\nfrom swiftwriter.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", run, *args], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def _backup(project, env) -> Path:
    made = _cli(env, "project", "backup", str(project))
    assert made.returncode == 0, made.stderr
    return Path(made.stdout.strip().split(" to ", 1)[1])


def _folder(project, env) -> Path:
    return Path(env["SWIFTWRITER_DATA_DIR"]) / "backups" / backups_mod.folder_for(project).name


def test_clock_a_year_fast_keeps_the_dailies(project, env):
    folder = _folder(project, env)
    folder.mkdir(parents=True)
    start = datetime.now().replace(microsecond=0)
    dailies = [folder / f"{start - timedelta(days=d):{backups_mod.STAMP}}.swiftwriter"
               for d in range(1, 21)]  # fmt: skip
    for path in dailies:
        shutil.copyfile(project, path)
    fast = _cli(env, "project", "backup", str(project),
                code="import time\nreal = time.time\ntime.time = lambda: real() + 365 * 86400")  # fmt: skip
    assert fast.returncode == 0, fast.stderr
    assert all(p.exists() for p in dailies), "a backup made a year fast deleted the dailies"
    _backup(project, env)  # the clock right again
    assert all(p.exists() for p in dailies) and len(list(folder.glob("*.swiftwriter"))) == 22
    check_project(project, [BASE])


STALL = """
import os, sys, time
def stall(*args, **kwargs):
    print("stalled", flush=True)
    print("stalled", flush=True)
    time.sleep(120)
os.{call} = stall
from swiftwriter.cli import main
main(sys.argv[1:])
"""


def test_killed_backup_and_restore_leave_no_partials(project, env, tmp_path):
    with Project.open(project) as p:
        p.add_document("Bulk", "filler " * 200_000)
    made = _backup(project, env)
    kill_when(STALL.format(call="replace"), "stalled", env, "project", "backup", str(project))
    folder = made.parent
    assert list(folder.glob(".*.partial")), "the killed backup left its temporary"
    listed = _cli(env, "project", "backups", str(project))
    assert listed.returncode == 0 and str(made) in listed.stdout, listed.stderr
    assert not list(folder.glob(".*.partial"))
    where = tmp_path / "restored"
    where.mkdir()
    kill_when(STALL.format(call="link"), "stalled", env,
              "project", "restore", str(made), str(where / "First.swiftwriter"))  # fmt: skip
    partials = [p for p in where.iterdir() if p.name.startswith(".")]
    assert partials and sum(p.stat().st_size for p in partials) > 1_000_000
    again = _cli(env, "project", "restore", str(made), str(where / "Second.swiftwriter"))
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in where.iterdir()) == ["Second.swiftwriter"]
    check_project(where / "Second.swiftwriter", [BASE])
    check_project(project, [BASE])


def test_restore_through_a_planted_link(project, env, tmp_path):
    made = _backup(project, env)
    victim = tmp_path / "victim.db"
    victim.write_bytes(b"")
    new = tmp_path / "New.swiftwriter"
    Path(tmp_path / f".{new.name}.restoring").symlink_to(victim)
    result = _cli(env, "project", "restore", str(made), str(new))
    assert result.returncode == 0, result.stderr
    assert victim.read_bytes() == b"", "the restore wrote through the planted link"
    check_project(new, [BASE])


def test_restore_where_hard_links_fail(project, env, tmp_path):
    made = _backup(project, env)
    new = tmp_path / "New.swiftwriter"
    no_links = ("import errno, os\n"
                "def link(*a, **k):\n    raise OSError(errno.EPERM, 'Operation not permitted')\n"
                "os.link = link")  # fmt: skip
    result = _cli(env, "project", "restore", str(made), str(new), code=no_links)
    assert result.returncode == 0, result.stderr
    check_project(new, [BASE])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_damaged_backup_is_refused(project, env, tmp_path):
    made = _backup(project, env)
    made.write_bytes(made.read_bytes().replace(b"went wrong", b"went WRONG"))
    listed = _cli(env, "project", "backups", str(project))
    assert "DAMAGED" in listed.stdout, listed.stdout
    new = tmp_path / "New.swiftwriter"
    one_line(_cli(env, "project", "restore", str(made), str(new)), "checksum")
    assert not new.exists()
    check_project(project, [BASE])


PLANTED = (
    "CREATE TRIGGER wipe AFTER UPDATE ON documents BEGIN DELETE FROM documents; END;"
    "CREATE TRIGGER wipe_new AFTER INSERT ON documents BEGIN DELETE FROM documents; END;"
    "CREATE VIEW peek AS SELECT text FROM documents;"
)


def _plant(path) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(PLANTED)
    conn.close()


def _planted_in(path) -> list:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    found = conn.execute("SELECT name FROM sqlite_master WHERE type IN ('trigger', 'view')")
    names = [row[0] for row in found]
    conn.close()
    return names


def test_planted_trigger_never_runs_on_saves_or_reaches_backups(project, env, tmp_path):
    _plant(project)
    made = _backup(project, env)
    assert _planted_in(made) == [] and _planted_in(project) != []
    source = tmp_path / "more.md"
    source.write_text("# More\n\nImported after the trigger was planted.")
    result = _cli(env, "project", "import", str(project), str(source))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert _planted_in(project) == []
    check_project(project, [BASE, "Imported after the trigger"])
    restored = tmp_path / "Restored.swiftwriter"
    assert _cli(env, "project", "restore", str(made), str(restored)).returncode == 0
    assert _planted_in(restored) == []


# The pre-migration copy goes slowly, a page at a time, announcing each: SIGKILL lands midway.
SLOW_COPY = """
import sqlite3, sys, types
import swiftwriter.store.inspection as inspection_mod

class Slow(sqlite3.Connection):
    def backup(self, target, **kwargs):
        def progress(status, remaining, total):
            print("copying", remaining, "of", total, flush=True)
        return super().backup(target, pages=1, progress=progress)

shim = types.ModuleType("sqlite3")
shim.__dict__.update(sqlite3.__dict__)
shim.connect = lambda *args, **kwargs: sqlite3.connect(*args, factory=Slow, **kwargs)
inspection_mod.sqlite3 = shim  # the read-only connection the copy reads
from swiftwriter.store import Project
Project.open(sys.argv[1]).close()
print("migrated", flush=True)
"""


def test_killed_migration_redoes_its_backup(env, tmp_path):
    from swiftwriter.store import schema

    old = tmp_path / "Old.swiftwriter"
    conn = sqlite3.connect(old)
    conn.executescript(FORMAT_1_SQL)
    conn.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO meta VALUES ('title', 'Old')")
    conn.execute("INSERT INTO documents VALUES (1, NULL, 'chapter', 'One', ?, 0, 't', 't')",
                 [BASE + " filler" * 200_000])  # fmt: skip
    conn.commit()
    conn.close()
    before = digest(old)
    lines = kill_when(SLOW_COPY, "copying", env, str(old))
    assert lines and "migrated" not in lines
    assert digest(old) == before  # killed before the migration: the file as it was
    done = subprocess.run([sys.executable, "-c", SLOW_COPY.replace("pages=1", "pages=-1"),
                           str(old)], env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stdout.split()[-1] == "migrated", done.stderr
    bak = tmp_path / "Old.swiftwriter.format1.bak"
    copy = sqlite3.connect(f"file:{bak}?mode=ro", uri=True)
    assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert copy.execute("PRAGMA user_version").fetchone()[0] == 1
    assert copy.execute("SELECT text FROM documents").fetchone()[0].startswith(BASE)
    copy.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    check_project(old, [BASE])

"""Fault matrix rows: kills mid-write, a full disk, read-only files, a symlinked lock, a zip
bomb, bad encodings and a corrupt registry (shared checks in `common.py`)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest
from swiftwriter.store import Project
from swiftwriter.store import backups as backups_mod

from tests.conftest import run_as_user
from tests.fault_matrix.common import BASE, CLI, check_project, digest, kill_when, one_line


def test_sigkill_mid_take(project, env):
    lines = kill_when(
        """
        import sys, time
        from swiftwriter.store import Project
        p = Project.open(sys.argv[1])
        doc = p.documents()[0]
        rec = p.start_generation(doc.id, "h", "m", "t", {"written_after": "wrong."}, 0)
        for i in range(10**6):
            rec.append(f" word{i}", [i % 200])
            print(f"committed word{i}", flush=True)
        """,
        "committed",
        env,
        str(project),
    )
    last = lines[-1].split()[-1]
    check_project(project, [BASE, f" {last}"])
    with Project.open(project) as p:
        (lost,) = p.interrupted_generations()
        p.recover_generation(lost.id)
        text = p.document(p.documents()[0].id).text
    assert text.startswith(BASE) and f" {last}" in text and text.count(" word0 ") <= 1


def test_sigkill_mid_autosave(project, env):
    lines = kill_when(
        """
        import sys
        from swiftwriter.store import Project
        p = Project.open(sys.argv[1])
        doc = p.documents()[0]
        for i in range(10**6):
            p.update_text(doc.id, sys.argv[2] + f" revision {i}." + " filler" * 20000)
            print(f"saved revision {i}.", flush=True)
        """,
        "saved",
        env,
        str(project),
        BASE,
    )
    # The child may save a few more revisions between its last line and the kill: the
    # document must hold the last one it announced or a later one, whole.
    announced = int(lines[-1].split()[-1].rstrip("."))
    check_project(project, [BASE + " revision "])
    with Project.open(project) as p:
        text = p.document(p.documents()[0].id).text
    saved = int(re.match(re.escape(BASE) + r" revision (\d+)\.", text).group(1))
    assert saved >= announced
    assert text == BASE + f" revision {saved}." + " filler" * 20000


def test_sigkill_mid_backup(project, env):
    with Project.open(project) as p:
        for i in range(30):
            p.add_document(f"Scene {i}", "filler " * 20000)
    lines = kill_when(
        """
        import sys
        from swiftwriter.store import Project
        with Project.open(sys.argv[1], readonly=True) as p:
            for i in range(10**6):
                made = p.backup()
                print("backed up", made.path, flush=True)
        """,
        "backed up",
        env,
        str(project),
    )
    assert lines
    check_project(project, [BASE])
    folder = Path(env["SWIFTWRITER_DATA_DIR"]) / "backups"
    finished = sorted(folder.rglob(f"*{backups_mod.SUFFIX}"))
    assert finished, "the backups that finished are kept"
    for backup in finished:
        with Project.open(backup, readonly=True) as b:
            assert b.integrity_check() == "ok"


def test_sigkill_mid_import(project, env, tmp_path):
    source = tmp_path / "big.md"
    source.write_text("".join(f"# Part {i}\n\n" + "text " * 5000 + "\n\n" for i in range(400)))
    before = digest(source)
    subprocess.run(
        [sys.executable, "-c", "import os, signal, threading, sys\n"
         "threading.Timer(0.8, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()\n"
         "from swiftwriter.cli import main\nmain(sys.argv[1:])",
         "project", "import", str(project), str(source)],
        env=env, timeout=120,
    )  # fmt: skip
    check_project(project, [BASE])
    with Project.open(project, readonly=True) as p:
        assert len(p.documents()) in (1, 1 + 400)  # one transaction: all of it or none
    assert digest(source) == before


def test_disk_full_during_a_save(project, env, tmp_path):
    source = tmp_path / "long.md"
    source.write_text("# Long\n\n" + "words " * 400_000)
    limit = project.stat().st_size + 64 * 1024
    code = textwrap.dedent(
        f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
        from swiftwriter.cli import main
        sys.exit(main(sys.argv[1:]))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code, "project", "import", str(project), str(source)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    one_line(result, "Could not save")
    check_project(project, [BASE])


@pytest.mark.parametrize("where", ["file", "folder"])
def test_read_only_file_and_folder(project, tmp_path, where):
    source = tmp_path / "more.md"
    source.write_text("# More\n\nText.")
    (project if where == "file" else project.parent).chmod(0o444 if where == "file" else 0o555)
    try:
        result = run_as_user(
            "import sys\nfrom swiftwriter.cli import main\nsys.exit(main(sys.argv[1:]))",
            "project", "import", str(project), str(source),
        )  # fmt: skip
    finally:
        project.chmod(0o644)
        project.parent.chmod(0o755)
    one_line(result, "read-only")
    check_project(project, [BASE])


def test_symlinked_lock(project, env, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    Path(f"{project}.lock").symlink_to(victim)
    source = tmp_path / "more.md"
    source.write_text("# More\n\nText.")
    result = subprocess.run([*CLI, "project", "import", str(project), str(source)], env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    one_line(result, "symbolic link")
    assert victim.read_text() == "keep me"
    Path(f"{project}.lock").unlink()
    check_project(project, [BASE])


def test_zip_bomb(project, env, tmp_path):
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr("[Content_Types].xml", "<Types/>")
        with out.open("word/document.xml", "w", force_zip64=True) as part:
            for _ in range(300):
                part.write(b" " * (1 << 20))
    before = digest(bomb)
    start = time.monotonic()
    result = subprocess.run([*CLI, "project", "import", str(project), str(bomb)], env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    one_line(result, "refused")
    assert time.monotonic() - start < 30  # the child's start-up included; refusal is < 2 s
    assert digest(bomb) == before
    check_project(project, [BASE])


@pytest.mark.parametrize(
    "data, expect",
    [
        ("Caf\u00e9 au lait".encode() + b"\xff", "not UTF-8 text"),
        ("no mark".encode("utf-16-le"), "not a text file"),
    ],
)
def test_bad_encodings(project, env, tmp_path, data, expect):
    source = tmp_path / "odd.txt"
    source.write_bytes(data)
    result = subprocess.run([*CLI, "project", "import", str(project), str(source)], env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    one_line(result, expect)
    assert source.read_bytes() == data
    check_project(project, [BASE])


def test_corrupt_registry(env, tmp_path):
    registry = Path(env["SWIFTWRITER_CONFIG_DIR"]) / "models.toml"
    registry.parent.mkdir(parents=True)
    registry.write_text('[models.mine]\nsource = "folder"\npath = 42\n')
    before = registry.read_bytes()
    result = subprocess.run([*CLI, "models", "list"], env=env, capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    one_line(result, "key 'path'")
    assert registry.read_bytes() == before

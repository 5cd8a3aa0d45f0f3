"""Fault matrix rows: an export aimed at the project under another spelling, registry ids that
are paths, a symlinked registry, the lock under another spelling, a full disk and a hot
rollback journal (shared checks in `common.py`)."""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from swiftwriter.store import Project

from tests.conftest import run_as_user
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
    if how == "hardlink":
        Path(target).unlink()  # a project with two names is not opened for writing
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


# -- a registry id is a name, never a path --------------------------------------------------
def _gguf_entry() -> str:
    """The shipped default's settings: a planted entry under another id converts for real."""
    import tomllib

    from swiftwriter import paths

    shipped = tomllib.loads((paths.shipped_models_dir() / "registry.toml").read_text())
    entry = next(e for e in shipped["models"].values() if e.get("default"))
    keys = ("source", "package", "package_version", "file", "sha256")
    return "".join(f'{k} = "{entry[k]}"\n' for k in keys)


@pytest.fixture
def model_env(env, tmp_path):
    """The child's converted models go into its own data folder, not the session's."""
    env = {k: v for k, v in env.items() if k != "SWIFTWRITER_MODELS_DIR"}
    data = Path(env["SWIFTWRITER_DATA_DIR"])
    (data / "backups").mkdir(parents=True)
    (data / "backups" / "Novel-1.swiftwriter").write_text("a backup")
    (data / "unsaved").mkdir()
    (data / "unsaved" / "kept.md").write_text("text a failed save kept")
    return env


@pytest.mark.parametrize("model_id", ["..", ".", "a/b", "ABSOLUTE", ".hidden", "back\\\\slash"])
def test_a_registry_id_that_is_a_path_is_refused_on_read(model_env, tmp_path, model_id):
    outside = tmp_path / "outside"
    (outside / "x").mkdir(parents=True)
    (outside / "x" / "precious.txt").write_text("keep me")
    model_id = model_id.replace("ABSOLUTE", str(outside / "x"))
    registry = Path(model_env["SWIFTWRITER_CONFIG_DIR"]) / "models.toml"
    registry.parent.mkdir(parents=True)
    registry.write_text(f'[models."{model_id}"]\n' + _gguf_entry())
    before = _files(tmp_path)
    for args in (["models", "prepare", model_id.replace("\\\\", "\\")], ["models", "list"]):
        result = subprocess.run([*CLI, *args], env=model_env, capture_output=True, text=True,
                                timeout=600)  # fmt: skip
        one_line(result, "not a plain name")
        assert str(registry) in result.stderr
    assert _files(tmp_path) == before


def test_a_symlinked_model_folder_is_not_followed(model_env, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    models = Path(model_env["SWIFTWRITER_DATA_DIR"]) / "models"
    models.mkdir()
    registry = Path(model_env["SWIFTWRITER_CONFIG_DIR"]) / "models.toml"
    registry.parent.mkdir(parents=True)
    registry.write_text('[models."planted"]\n' + _gguf_entry())
    (models / "planted").symlink_to(outside, target_is_directory=True)
    before = _files(tmp_path)
    # a named dtype: `auto` would first measure the model (and remember it in the data folder)
    result = subprocess.run([*CLI, "models", "prepare", "planted", "--force", "--dtype", "float32"],
                            env=model_env, capture_output=True, text=True, timeout=600)  # fmt: skip
    one_line(result, "symbolic link")
    assert _files(tmp_path) == before


def test_models_add_writes_through_a_symlinked_registry(env, tmp_path):
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "models.toml"
    real.write_text("# kept in my dotfiles\n")
    link = Path(env["SWIFTWRITER_CONFIG_DIR"]) / "models.toml"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    folder = tmp_path / "tiny"
    folder.mkdir()
    small = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
             "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 256}  # fmt: skip
    # sized when added: llama's defaults declare 6.7 billion parameters, more than some hold
    (folder / "config.json").write_text(json.dumps(small))
    (folder / "model.safetensors").write_bytes(b"")
    result = subprocess.run([*CLI, "models", "add", "tiny", str(folder)], env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and link.resolve() == real
    text = real.read_text()
    assert text.startswith("# kept in my dotfiles") and "[models.tiny]" in text
    assert sorted(p.name for p in dotfiles.iterdir()) == ["models.toml"]
    assert sorted(p.name for p in link.parent.iterdir()) == ["models.toml"]


# -- one writer per project, whatever name it is opened by -----------------------------------
@pytest.mark.parametrize("held_by", ["real", "link"])
@pytest.mark.parametrize("how", ["symlink", "symlinked-folder", "relative"])
def test_the_lock_holds_under_another_spelling(project, env, tmp_path, held_by, how):
    if how == "symlink":
        other = tmp_path / "Link.swiftwriter"
        other.symlink_to(project)
    elif how == "symlinked-folder":
        (tmp_path / "shortcut").symlink_to(tmp_path, target_is_directory=True)
        other = tmp_path / "shortcut" / project.name
    else:
        other = Path(os.path.relpath(project, tmp_path / "data"))
    source = tmp_path / "more.md"
    source.write_text("# More\n\nText.")
    first, second = (project, other) if held_by == "real" else (other, project)
    (tmp_path / "data").mkdir(exist_ok=True)
    with Project.open(tmp_path / "data" / first if how == "relative" else first) as held:
        result = subprocess.run([*CLI, "project", "import", str(second), str(source)], env=env,
                                cwd=tmp_path / "data", capture_output=True, text=True,
                                timeout=60)  # fmt: skip
        one_line(result, f"is open in another SwiftWriter (process {os.getpid()} ")
        held.add_document("Chapter 2", "Written by the one writer.")
    check_project(project, [BASE, "Written by the one writer."])
    with Project.open(project, readonly=True) as p:
        assert "More" not in [d.title for d in p.documents()]


def test_a_project_with_a_second_hard_link_is_refused_for_writing(project, env, tmp_path):
    other = tmp_path / "elsewhere" / "Same.swiftwriter"
    other.parent.mkdir()
    os.link(project, other)
    source = tmp_path / "more.md"
    source.write_text("# More\n\nText.")
    before = digest(project)
    for name in (project, other):  # each name's lock and -wal would be its own
        result = subprocess.run([*CLI, "project", "import", str(name), str(source)], env=env,
                                capture_output=True, text=True, timeout=60)  # fmt: skip
        one_line(result, "2 names (hard links)")
    assert digest(project) == before
    other.unlink()
    check_project(project, [BASE])


# -- a full disk is named as such, a hot rollback journal is rolled back ---------------------
def _leave_hot_journal(project: Path, env) -> None:
    """A project in rollback-journal mode (as before it was first opened for writing, after
    an older release) whose write was killed after SQLite spilled pages into the file."""
    conn = sqlite3.connect(project)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    code = textwrap.dedent(
        """
        import os, sqlite3, sys
        conn = sqlite3.connect(sys.argv[1], isolation_level=None)
        conn.execute("PRAGMA cache_size = 10")  # spill to the file before the commit
        conn.execute("BEGIN")
        conn.execute("UPDATE documents SET text = ?", ["never committed " * 200_000])
        os.kill(os.getpid(), 9)
        """
    )
    subprocess.run([sys.executable, "-c", code, str(project)], env=env, timeout=60)
    assert Path(f"{project}-journal").stat().st_size > 0


def test_a_hot_rollback_journal_is_rolled_back_not_called_damaged(project, env, tmp_path):
    _leave_hot_journal(project, env)
    before = digest(project)
    out = tmp_path / "book.md"
    result = subprocess.run([*CLI, "export", str(project), "--out", str(out)], env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    one_line(result, "unfinished change")  # read-only: cannot roll back, says why
    assert "damaged" not in result.stderr and digest(project) == before
    source = tmp_path / "more.md"
    source.write_text("# More\n\nText.")
    result = subprocess.run([*CLI, "project", "import", str(project), str(source)], env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert not Path(f"{project}-journal").exists()
    check_project(project, [BASE, "Text."])
    with Project.open(project, readonly=True) as p:
        assert not any("never committed" in p.document(d.id).text for d in p.documents())


def test_sqlite_full_says_the_disk_is_full(project, env):
    """Runs everywhere: SQLite's own full condition (a page limit) in the child."""
    code = textwrap.dedent(
        """
        import sys
        from swiftwriter.store import Project
        from swiftwriter.store.records import ProjectError
        with Project.open(sys.argv[1]) as p:
            p.db.execute("PRAGMA max_page_count = " + str(p.db.execute("PRAGMA page_count").fetchone()[0] + 2))
            try:
                p.add_document("Long", "words " * 400_000)
            except ProjectError as exc:
                sys.exit(f"swiftwriter: {exc}")
        """
    )
    result = subprocess.run([sys.executable, "-c", code, str(project)], env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    one_line(result, "the disk is full")
    assert "Novel.swiftwriter" in result.stderr and "damaged" not in result.stderr
    check_project(project, [BASE])


@pytest.fixture
def small_disk(tmp_path):
    """A real 4 MiB file system (tmpfs): needs root and a kernel that lets it mount one."""
    folder = tmp_path / "small"
    folder.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)],
                           capture_output=True, text=True)  # fmt: skip
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mount.stderr.strip()}")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=True)


def _fill(folder: Path, leave: int = 0) -> Path:
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


@pytest.mark.parametrize("leave", [0, 256 * 1024])  # nothing left to open; too little to save
def test_a_full_disk_says_so(small_disk, env, tmp_path, leave):
    project = small_disk / "Novel.swiftwriter"
    with Project.create(project, title="Novel") as p:
        p.add_document("Chapter 1", BASE)
    filler = _fill(small_disk, leave)
    before = digest(project)
    source = tmp_path / "long.md"
    source.write_text("# Long\n\n" + "words " * 400_000)
    commands = [["project", "import", str(project), str(source)]]
    if not leave:
        commands.append(["export", str(project), "--out", str(tmp_path / "book.md")])
    for args in commands:
        result = subprocess.run([*CLI, *args], env=env, capture_output=True, text=True,
                                timeout=60)  # fmt: skip
        one_line(result, "the disk is full")
        assert "Novel.swiftwriter" in result.stderr and "damaged" not in result.stderr
    assert digest(project) == before
    filler.unlink()
    check_project(project, [BASE])


def test_a_hot_journal_in_a_read_only_folder_is_not_read_past(project, env, tmp_path):
    """Read-only folders are read as immutable, which would skip the journal and show the
    half-written file: refused in one line instead, and nothing changes."""
    _leave_hot_journal(project, env)
    before = digest(project)
    (tmp_path / "out").mkdir()
    project.parent.chmod(0o555)
    try:
        result = run_as_user(
            "import sys\nfrom swiftwriter.cli import main\nsys.exit(main(sys.argv[1:]))",
            "export", str(project), "--out", str(tmp_path / "out" / "book.md"),
        )  # fmt: skip
    finally:
        project.parent.chmod(0o755)
    one_line(result, "Novel.swiftwriter-journal")
    assert "damaged" not in result.stderr and digest(project) == before
    check_project(project, [BASE])


@pytest.mark.slow
def test_a_real_conversion_replaces_only_the_models_own_folder(model_env, tmp_path):
    data = Path(model_env["SWIFTWRITER_DATA_DIR"])
    stale = data / "models" / "planted"
    stale.mkdir(parents=True)
    (stale / "old-weights.bin").write_text("an earlier conversion")
    (data / "models" / "other-model").mkdir()
    (data / "models" / "other-model" / "config.json").write_text("{}")
    registry = Path(model_env["SWIFTWRITER_CONFIG_DIR"]) / "models.toml"
    registry.parent.mkdir(parents=True)
    registry.write_text('[models."planted"]\n' + _gguf_entry())
    before = {k: v for k, v in _files(tmp_path).items() if "models/planted" not in k}
    # a named dtype: `auto` would first measure the model (and remember it in the data folder);
    # stored: the folder gets the config and tokenizer, the weights stay in the file
    result = subprocess.run([*CLI, "models", "prepare", "planted", "--force", "--dtype", "stored"],
                            env=model_env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    after = _files(tmp_path)
    assert {k: v for k, v in after.items() if "models/planted" not in k} == before
    assert "data/models/planted/config.json" in after
    assert "data/models/planted/old-weights.bin" not in after

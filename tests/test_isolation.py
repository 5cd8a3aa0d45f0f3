"""The suite never touches the writer's own folders: every per-user folder is temporary, the
default model is reached through a link, and a test that writes into a real folder fails the
session."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import platformdirs
import pytest
from swiftwriter import paths

from tests import conftest, isolation

ROOT = Path(__file__).resolve().parents[1]


def test_every_folder_the_app_uses_is_temporary():
    root = conftest.TEST_ROOT
    used = [
        paths.data_dir(),
        paths.config_dir(),
        paths.models_dir(),
        paths.cache_dir(),
        Path(platformdirs.user_state_dir("swiftwriter")),
        Path(platformdirs.user_cache_dir("huggingface")),
        Path(platformdirs.user_config_dir("SwiftWriter")),
        Path(os.environ["SWIFTWRITER_LOG_DIR"]),
        Path(os.environ["SWIFTWRITER_SETTINGS_PATH"]),
    ]
    for folder in used:
        assert folder.is_relative_to(root), folder
    for real in conftest.REAL_FOLDERS.values():
        assert not real.is_relative_to(root)


def test_the_converted_models_are_reached_through_links():
    real = conftest.REAL_FOLDERS["models"]
    converted = sorted(
        p.name for p in real.iterdir() if p.is_dir() and not p.name.startswith(".")
    ) if real.is_dir() else []  # fmt: skip
    linked = sorted(p.name for p in paths.models_dir().iterdir() if p.is_symlink())
    assert linked == converted
    for name in linked:
        assert (paths.models_dir() / name).resolve() == (real / name).resolve()


def test_a_conversion_never_replaces_or_follows_a_linked_model(tmp_path):
    """The link that reaches the writer's converted model cannot be used to remove it."""
    from swiftwriter.errors import UserError
    from swiftwriter.modelstore import auto_convert, registry

    entry = registry.default_entry()
    link = paths.models_dir() / entry.id
    planted = not link.is_symlink()  # the writer has not converted it: a stand-in link
    if planted:
        (tmp_path / "real").mkdir()
        link.symlink_to(tmp_path / "real")
    try:
        with pytest.raises(UserError, match="symbolic link"):
            auto_convert.convert(entry, force=True)
        assert link.is_symlink()
    finally:
        if planted:
            link.unlink()


def test_snapshot_sees_a_new_a_changed_and_a_removed_file(tmp_path):
    (tmp_path / "kept").write_text("a")
    (tmp_path / "edited").write_text("a")
    (tmp_path / "gone").write_text("a")
    before = isolation.snapshot([tmp_path])
    (tmp_path / "edited").write_text("ab")
    (tmp_path / "gone").unlink()
    (tmp_path / "sub").mkdir()
    after = isolation.snapshot([tmp_path])
    found = isolation.changes(before, after)
    assert found == [f"new: {tmp_path / 'sub'}", f"removed: {tmp_path / 'gone'}",
                     f"changed: {tmp_path / 'edited'}"]  # fmt: skip


def test_a_test_that_writes_into_a_real_folder_fails_the_session(tmp_path):
    """A child pytest session with this suite's conftest as a plugin, whose 'real' folders
    are under tmp_path: a test writing into one passes itself, yet the session fails."""
    home = tmp_path / "home"
    probe = tmp_path / "test_probe.py"
    probe.write_text(textwrap.dedent(
        """
        from tests import conftest

        def test_writes_where_it_must_not():
            folder = conftest.REAL_FOLDERS["data"]
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "stray.txt").write_text("oops")
        """
    ))  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWIFTWRITER_", "XDG_"))}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "share"), PYTHONPATH=str(ROOT))
    run = [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
           "--rootdir", str(tmp_path), "-c", os.devnull, str(probe)]  # fmt: skip
    result = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert "1 passed" in result.stdout, result.stdout[-2000:]
    assert result.returncode == 1, result.stdout[-2000:]
    assert "Tests wrote outside their temporary folders" in result.stdout
    assert "stray.txt" in result.stdout
    probe.write_text("def test_writes_nothing():\n    pass\n")
    result = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:]

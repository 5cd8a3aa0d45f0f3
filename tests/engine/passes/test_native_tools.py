"""The kernel's build tools: the venv's ninja is found when PATH does not lead to it (a venv
used without activating it), a build that cannot happen says why in one line, once, and a
build killed halfway does not hold every later start."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from swiftwriter.engine.passes import native


def child(code: str, tmp_path, **env) -> subprocess.CompletedProcess:
    full = {**os.environ, "SWIFTWRITER_CACHE_DIR": str(tmp_path / "cache"), **env}
    full.pop(native.DISABLE_ENV, None)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=300
    )


def test_the_venvs_ninja_is_found_without_path(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    code = (
        "import shutil; from swiftwriter.engine.passes import native; "
        "assert shutil.which('ninja') is None; print(native.find_ninja())"
    )
    done = child(code, tmp_path, PATH=str(empty))
    assert done.returncode == 0, done.stderr
    found = done.stdout.strip()
    assert found != "None" and os.access(found, os.X_OK)
    version = subprocess.run([found, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.strip()[0].isdigit()


def test_the_builder_gets_ninja_on_its_path_only_while_building(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(native, "_compiler", lambda: "/usr/bin/c++")
    seen = []
    monkeypatch.setattr(native, "_build_threaded", lambda: seen.append(os.environ["PATH"]))
    native._build()
    folder = os.path.dirname(native.find_ninja())
    assert seen == [os.pathsep.join([folder, str(tmp_path)])]
    assert os.environ["PATH"] == str(tmp_path)


def test_without_a_compiler_one_line_says_why_once(tmp_path):
    compiler = str(tmp_path / "no-such-g++")
    code = (
        "from swiftwriter.engine.passes import native\n"
        "assert native.tree_attention() is None and native.tree_attention() is None\n"
        "print(native.unavailable())\n"
    )
    done = child(code, tmp_path, CXX=compiler)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("swiftwriter: tree-attention kernel unavailable (")
    assert f"no C++ compiler: {compiler} not found" in lines[0]
    assert "build-essential" in lines[0] and "PyTorch's attention" in lines[0]
    assert "no C++ compiler" in done.stdout


def builder_that_holds(folder: Path) -> subprocess.Popen:
    """A process in the middle of building `folder`: it holds the builder's lock and has
    written PyTorch's `lock` file, and builds until it is killed."""
    code = (
        "import sys, time; from pathlib import Path\n"
        "from swiftwriter.engine.passes import native\n"
        "folder = Path(sys.argv[1])\n"
        "with native._one_builder(folder):\n"
        "    (folder / 'lock').write_text('')\n"
        "    print('building', flush=True)\n"
        "    time.sleep(600)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "building"
    return holder


def test_a_build_killed_halfway_does_not_hold_later_starts(tmp_path):
    # the build made by the set-up (the tests' cache holds a copy), else this test builds it
    made = Path(os.environ["SWIFTWRITER_CACHE_DIR"]) / "native"
    if made.is_dir():
        shutil.copytree(made, tmp_path / "cache" / "native", symlinks=True)
    where = child(
        "from swiftwriter.engine.passes import native\n"
        "print(native.build_dir() / native._name(native._flags() + native.OPENMP))",
        tmp_path,
    )
    folder = Path(where.stdout.strip())
    folder.mkdir(parents=True, exist_ok=True)
    holder = builder_that_holds(folder)
    holder.kill()  # the app closed mid-build
    holder.wait()
    assert (folder / "lock").exists()  # before: every later start waited for it for ever
    code = (
        "from swiftwriter.engine.passes import native\n"
        "assert native.tree_attention() is not None, native.unavailable()\n"
    )
    done = child(code, tmp_path)  # a hang fails here (the child's timeout)
    assert done.returncode == 0, done.stderr
    assert not (folder / "lock").exists()


def test_a_live_build_is_waited_for_and_its_lock_left_alone(tmp_path):
    folder = tmp_path / "kernel"
    folder.mkdir()
    holder = builder_that_holds(folder)
    try:
        busy = pytest.raises(TimeoutError, match="another SwiftWriter process")
        with busy, native._one_builder(folder, wait_s=0.5):
            pass
        assert (folder / "lock").exists()
    finally:
        holder.kill()
        holder.wait()
    with native._one_builder(folder, wait_s=10):
        assert not (folder / "lock").exists()  # its holder died: the mark was stale

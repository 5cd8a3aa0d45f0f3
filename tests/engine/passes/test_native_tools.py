"""The kernel's build tools: the venv's ninja is found when PATH does not lead to it (a venv
used without activating it), and a build that cannot happen says why in one line, once."""

from __future__ import annotations

import os
import subprocess
import sys

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

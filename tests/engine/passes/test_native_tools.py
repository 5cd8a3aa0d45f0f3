"""The kernel's build tools: the venv's ninja is found when PATH does not lead to it (a venv
used without activating it), a build that cannot happen says why in one line, once, a build
killed halfway does not hold every later start, and a build is loaded only when it is this
user's alone and the very file that was built (its checksum recorded then)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from swiftwriter import paths
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
    monkeypatch.setattr(native, "_build_threaded", lambda source: seen.append(os.environ["PATH"]))
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
        "print(native.build_dir() / native._name([*native._flags(), *native.OPENMP]))",
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
    library = folder / f"{folder.name}.so"  # what was loaded is recorded, for this user alone
    assert native._unrecorded(library) is None and stat.S_IMODE(library.stat().st_mode) == 0o700


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


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def small_library(path: Path, answer: int = 42) -> Path:
    """A tiny shared object made by the system's C compiler (the kernel needs one too)."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    source = path.with_name(f"{path.stem}-{answer}.c")
    source.write_text(f"int answer(void) {{ return {answer}; }}\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(path), str(source)], check=True)
    source.unlink()
    return path


@pytest.fixture
def kernel_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("SWIFTWRITER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(native, "_loaded", {})
    return paths.own_folder(native._own_build_dir() / "swiftwriter_tree_test")


def test_a_recorded_build_of_this_users_own_is_loaded(kernel_folder):
    library = small_library(kernel_folder / "swiftwriter_tree_test.so")
    os.chmod(library, 0o777)  # as the linker makes it under umask 000
    native._record(library)
    assert mode(library) == 0o700 and native._unrecorded(library) is None
    native._distrust_planted(library)
    assert library.is_file() and "distrusted" not in native._loaded


@pytest.mark.parametrize("change", ["unrecorded", "replaced", "writable", "open folder", "foreign"])
def test_any_other_build_is_removed_before_it_can_be_loaded(kernel_folder, change, monkeypatch):
    library = small_library(kernel_folder / "swiftwriter_tree_test.so")
    native._record(library)
    (kernel_folder / "tree_attention.o").write_bytes(b"")  # its objects go too
    if change == "unrecorded":
        native._checksum_file(library).unlink()
    elif change == "replaced":
        small_library(library, answer=7)
    elif change == "writable":
        os.chmod(library, 0o722)
    elif change == "open folder":
        os.chmod(kernel_folder, 0o777)
    else:
        monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
    native._distrust_planted(library)
    assert list(kernel_folder.iterdir()) == [] and mode(kernel_folder) == 0o700
    why = {"unrecorded": "no checksum was recorded when it was built",
           "replaced": "it is not the file that was built",
           "writable": f"{library} can be written by other users",
           "open folder": f"{kernel_folder} can be written by other users",
           "foreign": f"{library} belongs to another user"}[change]  # fmt: skip
    assert native._loaded["distrusted"] == f"{library} was not loaded ({why})"


def test_the_kernels_folder_is_this_users_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("SWIFTWRITER_CACHE_DIR", str(tmp_path / "cache"))
    folder = native.build_dir()
    folder.mkdir(parents=True)
    os.chmod(folder, 0o777)  # as an earlier version made it under umask 000
    assert native._own_build_dir() == folder and mode(folder) == 0o700
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
    with pytest.raises(OSError, match="is not this user's own folder"):
        native._own_build_dir()

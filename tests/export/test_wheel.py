"""The wheel `python -m build` makes works when installed: its own copy of swiftwriter finds
its resources and model registry inside the installed package and runs `--help` and `export`.

The build runs without isolation (no network: it uses this venv's setuptools) on a copy of the
checkout, so a stale build/ folder in the checkout cannot leak into the wheel. The fresh venv
gets the wheel alone (--no-deps); a .pth line makes this venv's third-party packages importable
without running this venv's editable-install hook, so only the wheel's swiftwriter is seen."""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import docx
import pytest

from tests.import_graph import modules_in, reachable

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "app" / "swiftwriter"

pytestmark = pytest.mark.slow

MAKE_PROJECT = """
import sys
from swiftwriter.store import Project
proj = Project.create(sys.argv[1], title="Wheel Book", author="W. Heel")
ch = proj.add_document("Chapter One", "It *works* from the wheel.", kind="chapter")
proj.add_document("A scene", "Scene text.", parent_id=ch.id, kind="scene")
proj.close()
"""

WHERE = """
import swiftwriter, swiftwriter.paths as p
from swiftwriter.modelstore import registry
print(swiftwriter.__file__)
print(p.resources_dir())
print(p.shipped_models_dir())
print(",".join(sorted(registry.load_registry())))
"""


def run(cmd, env, timeout=120):
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    assert result.returncode == 0, f"{cmd}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """`python -m build` as a packager runs it: an sdist, then the wheel built from that sdist."""
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("*.egg-info", "build", "dist")
    for name in ("app", "models", "resources"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, src / name)
    # A checkout that has run has bytecode caches; none of it may reach the wheel.
    cache = src / "resources" / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "__init__.cpython-311.pyc").write_bytes(b"stale")
    dist = tmp_path_factory.mktemp("dist")
    cmd = [sys.executable, "-m", "build", "--no-isolation", "--skip-dependency-check"]
    run([*cmd, "--outdir", str(dist), str(src)], env=dict(os.environ), timeout=180)
    assert len(list(dist.glob("swiftwriter-*.tar.gz"))) == 1
    [built] = dist.glob("swiftwriter-*.whl")
    return built


def test_wheel_holds_every_package_and_the_data_files(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for init in PACKAGE.rglob("__init__.py"):
        if "__pycache__" in init.parts:
            continue
        rel = init.relative_to(PACKAGE.parent).as_posix()
        assert rel in names, f"{rel} is missing: add its package to pyproject.toml"
    assert "swiftwriter/shipped_models/registry.toml" in names
    left_out = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]["exclude-package-data"]["swiftwriter.resources"]  # the scripts run from the checkout
    for res in (ROOT / "resources").rglob("*"):  # nested folders too: the "**/*" pattern
        if res.is_file() and "__pycache__" not in res.parts and res.suffix != ".pyc":
            rel = res.relative_to(ROOT / "resources").as_posix()
            inside = f"swiftwriter/resources/{rel}" in names
            if any(fnmatch.fnmatch(rel, pattern) for pattern in left_out):
                assert not inside, f"resources/{rel} is a script of the checkout: not for the wheel"
            else:
                assert inside, f"resources/{rel} is not in the wheel"
    assert "swiftwriter/resources/screenshots/main-window.png" in names  # the Help's pictures
    assert "swiftwriter/resources/training/PROVENANCE.md" in names  # the shipped drafter's card
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_every_module_in_the_wheel_is_reached_from_the_command_or_the_app(wheel, tmp_path):
    """`pip wheel .` holds no module that `swiftwriter` and the app cannot reach (by their
    imports, function-level ones included: tests/import_graph.py)."""
    zipfile.ZipFile(wheel).extractall(tmp_path)
    modules = modules_in(tmp_path / "swiftwriter")
    assert {"swiftwriter.cli", "swiftwriter.ui.app", "swiftwriter.engine.passes"} <= set(modules)
    unreached = sorted(set(modules) - reachable(modules))
    assert not unreached, f"the wheel ships modules nothing runs: {unreached}"


def test_installing_without_extras_pulls_no_matplotlib(wheel):
    """matplotlib (about 95 MB, `bench --plot` only) is required by the `bench` extra alone."""
    with zipfile.ZipFile(wheel) as zf:
        [meta] = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        lines = zf.read(meta).decode().splitlines()
    requires = [
        line.removeprefix("Requires-Dist:").strip()
        for line in lines
        if line.startswith("Requires-Dist:")
    ]
    assert any(r.startswith("torch") for r in requires)  # the lines were read
    matplotlib = [r for r in requires if r.lower().startswith("matplotlib")]
    assert matplotlib and all('extra == "bench"' in r for r in matplotlib), matplotlib
    assert "Provides-Extra: bench" in lines


def test_installed_wheel_runs_help_and_export(wheel, tmp_path):
    venv = tmp_path / "fresh"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env=dict(os.environ))
    py = venv / "bin" / "python"
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    }
    env.update(
        SWIFTWRITER_DATA_DIR=str(tmp_path / "data"),
        SWIFTWRITER_CONFIG_DIR=str(tmp_path / "config"),
        QT_QPA_PLATFORM="offscreen",
    )
    pip = [sys.executable, "-m", "pip", "--python", str(py), "--disable-pip-version-check"]
    run([*pip, "install", "--no-deps", "--no-index", "-q", str(wheel)], env=env)
    purelib = run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], env)
    deps = sysconfig.get_paths()["purelib"]  # this venv's: torch, python-docx, ...
    (Path(purelib.strip()) / "swiftwriter-test-deps.pth").write_text(deps + "\n")

    lines = run([str(py), "-c", WHERE], env).split("\n")
    module, resources, models, ids = lines[:4]
    for path in (module, resources, models):
        assert Path(path).is_relative_to(venv), f"{path} is not the wheel's copy"
    assert (Path(resources) / "swiftwriter.svg").is_file()
    assert (Path(models) / "registry.toml").is_file()
    assert "smollm2-135m-instruct" in ids.split(",")

    exe = str(venv / "bin" / "swiftwriter")
    out = run([exe, "--help"], env)
    assert "export" in out and "usage: swiftwriter" in out

    project = tmp_path / "book.swiftwriter"
    run([str(py), "-c", MAKE_PROJECT, str(project)], env)
    docx_out = tmp_path / "book.docx"
    out = run([exe, "export", str(project), "--format", "docx", "--out", str(docx_out)], env)
    assert "Exported 2 document(s)" in out
    document = docx.Document(str(docx_out))
    assert document.core_properties.title == "Wheel Book"
    assert "It works from the wheel." in [p.text for p in document.paragraphs]
    md_out = tmp_path / "book.md"
    run([exe, "export", str(project), "--out", str(md_out)], env)
    assert "# Chapter One\n\nIt *works* from the wheel." in md_out.read_text(encoding="utf-8")

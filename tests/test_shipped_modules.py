"""What the package ships is what its entry points run: every module of app/swiftwriter is
reached from the `swiftwriter` command or the app (through imports, function-level ones
included), the scripts kept under resources/ are left out of the wheel by its package-data
config, and matplotlib is an extra's, not the app's. tests/export/test_wheel.py checks the
same on a built wheel."""

from __future__ import annotations

import ast
import fnmatch
import tomllib
from pathlib import Path

from tests.import_graph import modules_in, reachable, references

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "app" / "swiftwriter"


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_module_of_the_package_is_reached_from_the_command_or_the_app():
    modules = modules_in(PACKAGE)
    assert "swiftwriter.cli" in modules and "swiftwriter.ui.app" in modules
    unreached = sorted(set(modules) - reachable(modules))
    assert not unreached, (
        f"{unreached}: no command of `swiftwriter` nor the app imports these; an experiment "
        "goes to experiments/ (run from the checkout), not into the package"
    )


def test_the_graph_follows_function_level_and_relative_imports(tmp_path):
    """The reachability reads what a plain top-level scan would miss (so the test above can
    only pass for a module that something really imports)."""
    root = tmp_path / "swiftwriter"
    (root / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "cli.py": "def main():\n    from swiftwriter.sub import inner\n",
        "sub/__init__.py": "",
        "sub/inner.py": "from . import sibling\nfrom .deep import thing\n",
        "sub/sibling.py": "PATH = 'swiftwriter.data'\n",
        "sub/deep.py": "thing = 1\n",
        "data/__init__.py": "",
        "stray.py": "import swiftwriter.sub.deep\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    modules = modules_in(root)
    assert references("swiftwriter.sub.inner", modules["swiftwriter.sub.inner"], modules) == {
        "swiftwriter",
        "swiftwriter.sub",
        "swiftwriter.sub.sibling",
        "swiftwriter.sub.deep",
    }
    got = reachable(modules, ["swiftwriter.cli"])
    assert set(modules) - got == {"swiftwriter.stray"}


def test_no_script_under_resources_is_shipped():
    """resources/ ships as package data ("**/*"); its scripts, run from the checkout, are
    excluded by pattern (setuptools matches them against the path under the package)."""
    config = pyproject()["tool"]["setuptools"]
    excluded = config["exclude-package-data"]["swiftwriter.resources"]
    scripts = [
        p.relative_to(ROOT / "resources").as_posix()
        for p in (ROOT / "resources").rglob("*")
        if p.suffix in (".py", ".sh") and p.name != "__init__.py" and "__pycache__" not in p.parts
    ]
    assert scripts, "no scripts found: the check would prove nothing"
    shipped = [s for s in scripts if not any(fnmatch.fnmatch(s, pat) for pat in excluded)]
    assert not shipped, f"resources/{shipped} would ship in the wheel: exclude them in pyproject"


def test_matplotlib_is_the_bench_extras_alone():
    project = pyproject()["project"]
    names = [d.split(">")[0].split("=")[0].split("<")[0].strip() for d in project["dependencies"]]
    assert "matplotlib" not in names
    assert any(d.startswith("matplotlib") for d in project["optional-dependencies"]["bench"])


def test_matplotlib_is_imported_inside_functions_only():
    """`swiftwriter` without the bench extra still starts: no module imports matplotlib at
    its top level."""
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n.split(".")[0] == "matplotlib" for n in names), path

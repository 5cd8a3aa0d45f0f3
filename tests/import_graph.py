"""Which of the package's modules the entry points reach, read from the source: every import
statement (function-level ones included, relative ones resolved), a package's __init__ for each
module imported from it, and a string that names a module exactly (importlib.resources.files
("swiftwriter.resources"), `python -m swiftwriter.x`). A module no entry point reaches is code
that ships without a way to run it."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

# what runs a module of the installed package: the `swiftwriter` command (pyproject's
# [project.scripts]), `python -m swiftwriter`, and the desktop app
ENTRY_POINTS = ("swiftwriter.cli", "swiftwriter.__main__", "swiftwriter.ui.app")


def modules_in(root: Path, package: str = "swiftwriter") -> dict[str, Path]:
    """Dotted name -> file for every .py file under `root`, the folder of `package`."""
    out = {}
    for path in root.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _absolute(node: ast.ImportFrom, name: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = name.split(".") if is_package else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def references(name: str, path: Path, known: Iterable[str]) -> set[str]:
    """The modules of `known` that module `name` (at `path`) imports or names."""
    known = set(known)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, name, path.name == "__init__.py")
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.add(node.value.removeprefix("-m ").strip())
    out = set()
    for module in found:
        parts = module.split(".")
        # importing a.b.c runs a, a.b and a.b.c
        out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return out & known


def reachable(modules: dict[str, Path], entries: Iterable[str] = ENTRY_POINTS) -> set[str]:
    """The modules reached from `entries`, following imports transitively."""
    seen: set[str] = set()
    todo = [e for e in entries if e in modules]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo.extend(p for p in (".".join(parts[:i]) for i in range(1, len(parts))) if p in modules)
        todo.extend(references(name, modules[name], modules) - seen)
    return seen

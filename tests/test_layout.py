"""The project's dependency rules, checked on the source: engine, store and export never
import Qt; store never imports torch; nothing outside ui (and the cli entry point) imports ui."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "app" / "swiftwriter"


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def modules_under(sub: str):
    return sorted((PACKAGE / sub).rglob("*.py"))


def test_layout_exists():
    for sub in ("engine", "store", "export", "ui", "modelstore"):
        assert (PACKAGE / sub / "__init__.py").is_file(), sub
    assert (PACKAGE / "cli.py").is_file()
    assert (PACKAGE.parents[1] / "models" / "registry.toml").is_file()


def test_core_packages_do_not_import_qt():
    for sub in ("engine", "store", "export", "modelstore"):
        for path in modules_under(sub):
            bad = {
                m
                for m in imported_modules(path)
                if m.split(".")[0] in {"PySide6", "PyQt5", "PyQt6"}
            }
            assert not bad, f"{path} imports {bad}"


def test_store_needs_no_torch():
    for path in modules_under("store"):
        bad = {m for m in imported_modules(path) if m.split(".")[0] in {"torch", "transformers"}}
        assert not bad, f"{path} imports {bad}"


def test_engine_knows_nothing_of_the_store_and_nothing_imports_ui():
    for path in PACKAGE.rglob("*.py"):
        mods = imported_modules(path)
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("engine/"):
            assert not any(m.startswith("swiftwriter.store") for m in mods), rel
        if not rel.startswith("ui/") and rel != "cli.py":
            assert not any(m.startswith("swiftwriter.ui") for m in mods), rel


def test_benchmarks_stand_outside_the_engine():
    """bench drives the engine from outside; the engine never imports bench or the CLI."""
    for path in modules_under("engine"):
        mods = imported_modules(path)
        bad = {m for m in mods if m.startswith(("swiftwriter.bench", "swiftwriter.commands"))}
        assert not bad, f"{path} imports {bad}"


def test_the_app_never_imports_the_command_line():
    for path in modules_under("ui"):
        bad = {m for m in imported_modules(path) if m.startswith("swiftwriter.commands")}
        assert not bad, f"{path} imports {bad}"


def test_one_thread_starter_for_every_worker():
    """Worker threads are made in one place (ui/stoppable.start_worker), so every worker is
    started, stopped and handed back to the GUI thread the same way."""
    makers = []
    for path in modules_under("."):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name == "QThread":
                    makers.append(path.relative_to(PACKAGE).as_posix())
    assert makers == ["ui/stoppable.py"]

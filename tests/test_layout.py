"""The project's dependency rules, checked on the source: engine, store, export and the writing
layer never import Qt; store never imports torch; nothing outside ui (and the cli entry point)
imports ui; the writing layer stands above the engine and the store, which never import it."""

from __future__ import annotations

import ast
import io
import re
import tokenize
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
    for sub in ("engine", "store", "export", "ui", "modelstore", "writing"):
        assert (PACKAGE / sub / "__init__.py").is_file(), sub
    assert (PACKAGE / "cli.py").is_file()
    assert (PACKAGE.parents[1] / "models" / "registry.toml").is_file()


def test_core_packages_do_not_import_qt():
    for sub in ("engine", "store", "export", "modelstore", "writing"):
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


def test_the_writing_layer_stands_above_the_engine_and_the_store():
    """A take, its session and its prompt live in writing/, which imports the engine and the
    store; they, the exports and the model store never import it (function-level imports
    included), so the layers point one way."""
    for sub in ("engine", "store", "export", "modelstore"):
        for path in modules_under(sub):
            bad = {m for m in imported_modules(path) if m.startswith("swiftwriter.writing")}
            assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"


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


BEHIND_THE_FACADE = ("swiftwriter.engine", "swiftwriter.training", "swiftwriter.modelstore")


def past_the_facade(path: Path) -> list[str]:
    """The engine, training and model-store names a file imports itself (function-level
    imports included; `from swiftwriter import modelstore` counts), instead of through the
    application facade (swiftwriter/application.py)."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            if any(name == p or name.startswith(p + ".") for p in BEHIND_THE_FACADE):
                bad.append(f"{node.lineno}: {name}")
                break
    return bad


def every_module_passes(check, sub: str = "ui") -> None:
    """`check(path)` finds nothing in any module under `sub`."""
    for path in modules_under(sub):
        bad = check(path)
        assert not bad, f"{path.relative_to(PACKAGE)}: {check.__name__} {bad}"


def test_the_window_reaches_models_and_the_engine_through_the_facade():
    """ui/ knows what a writer can do with models, not which package does it (issue 61):
    the engine, the drafter training and the model store only through application.py."""
    every_module_passes(past_the_facade)


def test_the_facade_itself_imports_no_torch():
    """Listing models, their advice and the panel's settings go through the facade: importing
    it must not cost torch's seconds (its calls that need torch import it)."""
    import subprocess
    import sys

    code = "import sys, swiftwriter.application; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_the_facade_check_catches_a_window_that_goes_round_it(tmp_path):
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text(
        "from swiftwriter import application, modelstore\n"
        "from swiftwriter.modelstore.registry import resolve\n"
        "def f():\n"
        "    import swiftwriter.engine.passes\n"
        "    from swiftwriter.training import pipeline\n"
        "    from swiftwriter.application import load_model\n"
        "    from swiftwriter.store import Project\n"
    )
    assert past_the_facade(sneaky) == [
        "1: swiftwriter.modelstore",
        "2: swiftwriter.modelstore.registry",
        "4: swiftwriter.engine.passes",
        "5: swiftwriter.training",
    ]


def window_mixins(path: Path) -> list[str]:
    """Classes of a file that share a window's `self` with it: a `*Mixin` class, or a Qt
    window (`QMainWindow`, `QDialog`, `QWidget`) built from more than one base."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = [getattr(b, "id", None) or getattr(b, "attr", "") for b in node.bases]
        if node.name.endswith("Mixin"):
            bad.append(node.name)
        elif len(bases) > 1 and any(b in {"QMainWindow", "QDialog", "QWidget"} for b in bases):
            bad.append(f"{node.name}({', '.join(bases)})")
    return bad


def test_the_window_is_controllers_not_mixins():
    """The window's jobs (a take, safekeeping, presets, exports and imports, models, tool
    windows) are controllers it holds, each with its own state, not mixins sharing its `self`
    (issue 61)."""
    every_module_passes(window_mixins)


def test_the_mixin_check_catches_the_old_window(tmp_path):
    old = tmp_path / "old.py"
    old.write_text(
        "class SafekeepingMixin:\n    pass\n"
        "class MainWindow(SafekeepingMixin, QMainWindow):\n    pass\n"
        "class Dialog(QDialog):\n    pass\n"
    )
    assert window_mixins(old) == ["SafekeepingMixin", "MainWindow(SafekeepingMixin, QMainWindow)"]


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


PASSES = "swiftwriter.engine.passes"


def imported_names(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) for every import in a file, function-level ones included; name is None
    for `import module`."""
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out += [(node.module, alias.name) for alias in node.names]
    return out


def door_violations(path: Path, door: list[str]) -> list[str]:
    """What a module outside the passes imports from behind their door: a module inside
    `engine/passes`, or a name the door does not list."""
    bad = []
    for module, name in imported_names(path):
        if module.startswith(PASSES + "."):
            bad.append(module)
        elif module == PASSES and name not in door:
            bad.append(f"{module}.{name}")
        elif module == "swiftwriter.engine" and name == "passes":
            bad.append("swiftwriter.engine.passes (as a module)")
    return bad


def the_door() -> list[str]:
    tree = ast.parse((PACKAGE / "engine" / "passes" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__all__":
            return [ast.literal_eval(elt) for elt in node.value.elts]
    raise AssertionError("engine/passes/__init__.py lists no __all__")


def test_the_engine_is_two_packages_and_training_stands_beside_it():
    for sub in ("engine/decoding", "engine/passes", "training"):
        assert (PACKAGE / sub / "__init__.py").is_file(), sub
    loose = [p.name for p in (PACKAGE / "engine").glob("*.py") if p.name != "__init__.py"]
    assert not loose, f"modules outside the two engine packages: {loose}"
    assert (PACKAGE / "engine" / "passes" / "tree_attention.cpp").is_file()


def test_the_model_passes_are_reached_through_their_one_door():
    """The decoding loop, the model store, benchmarks, training and the app import the model
    passes only from `swiftwriter.engine.passes`, and only names its `__all__` lists."""
    door = the_door()
    for path in PACKAGE.rglob("*.py"):
        if path.is_relative_to(PACKAGE / "engine" / "passes"):
            continue
        bad = door_violations(path, door)
        assert not bad, f"{path.relative_to(PACKAGE)} reaches behind the passes' door: {bad}"


def test_the_passes_know_nothing_of_decoding_or_training_and_the_engine_nothing_of_training():
    for path in modules_under("engine/passes"):
        mods = imported_modules(path)
        bad = {
            m for m in mods if m.startswith(("swiftwriter.engine.decoding", "swiftwriter.training"))
        }
        assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"
    for path in modules_under("engine"):
        bad = {m for m in imported_modules(path) if m.startswith("swiftwriter.training")}
        assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"


def test_the_door_check_catches_a_module_behind_the_door(tmp_path):
    """The check can fail: a decoding module that imports a pass module directly, or a name the
    door does not export, is reported (function-level imports included)."""
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text(
        "from swiftwriter.engine.passes import ModelRunner\n"
        "def f():\n"
        "    from swiftwriter.engine.passes.leanpass import LeanDecoder\n"
        "    from swiftwriter.engine.passes import GrowingLayer\n"
        "    import swiftwriter.engine.passes.kvcache\n"
    )
    assert door_violations(sneaky, the_door()) == [
        "swiftwriter.engine.passes.leanpass",
        "swiftwriter.engine.passes.GrowingLayer",
        "swiftwriter.engine.passes.kvcache",
    ]


def module_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, function-level imports included; `from
    package import name` counts as importing the submodule where `name` is one, else the
    package's __init__."""
    files = {}
    for path in root.rglob("*.py"):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in files.items():
        targets = set()
        for module, imported in imported_names(path):
            target = f"{module}.{imported}" if f"{module}.{imported}" in files else module
            while target and target not in files:  # `import a.b.c` of a name inside a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or round a loop (Tarjan's
    strongly connected components of more than one module), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def test_no_module_imports_itself_round_a_loop():
    """No import cycle, function-level imports included: a function-level import that closes a
    loop only hides it until the two modules are changed apart."""
    assert import_cycles(module_graph()) == []


def test_the_cycle_check_catches_a_loop_through_a_function_level_import(tmp_path):
    package = tmp_path / "swiftwriter"
    (package / "store").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "store" / "__init__.py").write_text("from swiftwriter.store.project import P\n")
    (package / "store" / "project.py").write_text(
        "from swiftwriter.store import backups\nclass P: ...\n"
    )
    (package / "store" / "backups.py").write_text(
        "def restore():\n    from swiftwriter.store.project import P\n"
    )
    (package / "store" / "records.py").write_text("import swiftwriter.store\n")
    assert import_cycles(module_graph(package)) == [
        ["swiftwriter.store.backups", "swiftwriter.store.project"]
    ]


DICT_WRITES = {"update", "pop", "popitem", "setdefault", "clear", "__setitem__", "__delitem__"}


def _a_dict(node: ast.AST) -> bool:
    """`x.__dict__` or `vars(x)`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "__dict__"
    return isinstance(node, ast.Call) and getattr(node.func, "id", None) == "vars"


def foreign_state_writes(path: Path) -> list[str]:
    """Where a file keeps state on an object that is not ours: a `_swiftwriter_*` attribute
    (as a name, or a string for setattr, getattr or a `__dict__` key) or a write through an
    object's `__dict__`. Per-model state lives in engine/passes/modelstate.py and LoadedModel."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        name = getattr(node, "attr", None) or getattr(node, "value", None)
        if isinstance(name, str) and name.startswith("_swiftwriter"):
            bad.append((node.lineno, name))
        elif (
            isinstance(node, ast.Subscript)
            and not isinstance(node.ctx, ast.Load)
            and _a_dict(node.value)
        ):
            bad.append((node.lineno, "__dict__[...] written"))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) in DICT_WRITES
            and _a_dict(node.func.value)
        ):
            bad.append((node.lineno, f"__dict__.{node.func.attr}(...)"))
    return [f"{line}: {what}" for line, what in sorted(bad)]


def test_no_state_is_kept_on_other_libraries_objects():
    """torch and transformers own their objects: a model's kernel, exact flag, tree-attention
    switch and costs are ours to keep, in our objects (issue 61)."""
    every_module_passes(foreign_state_writes, ".")


def test_the_foreign_state_check_catches_the_old_ways(tmp_path):
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text(
        "def f(model, loaded):\n"
        "    model._swiftwriter_tree_attention = True\n"
        "    model.__dict__['kernel'] = 'stock'\n"
        "    vars(model)['exact'] = True\n"
        "    model.__dict__.pop('kernel', None)\n"
        "    setattr(model, '_swiftwriter_exact', True)\n"
        "    return model.__dict__.get('kernel'), loaded.entry.__dict__\n"
    )
    assert foreign_state_writes(sneaky) == [
        "2: _swiftwriter_tree_attention",
        "3: __dict__[...] written",
        "4: __dict__[...] written",
        "5: __dict__.pop(...)",
        "6: _swiftwriter_exact",
    ]


def _is_dataclass(node: ast.ClassDef) -> bool:
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if (getattr(target, "id", None) or getattr(target, "attr", None)) == "dataclass":
            return True
    return False


def untyped_fields(path: Path) -> list[str]:
    """The fields of a file's dataclasses annotated `object` (alone or within a union or a
    container): `Class.field` for each."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.ClassDef) and _is_dataclass(node)):
            continue
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                names = {n.id for n in ast.walk(item.annotation) if isinstance(n, ast.Name)}
                strings = [
                    n.value for n in ast.walk(item.annotation) if isinstance(n, ast.Constant)
                ]
                if "object" in names or any("object" in str(s).split() for s in strings):
                    bad.append(f"{node.name}.{item.target.id}")
    return bad


def test_the_writing_layers_records_say_what_they_hold():
    """A take's request and the writing layer's other records name their fields' types (a
    Protocol or the store's class where several kinds fit), never `object` (issue 61): what a
    take needs is resolved before its session starts, and the type says what that is."""
    every_module_passes(untyped_fields, "writing")


def test_the_field_check_catches_an_object_field(tmp_path):
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text(
        "from dataclasses import dataclass, field\n"
        "import dataclasses\n"
        "@dataclass\n"
        "class Request:\n"
        "    project: object | None\n"
        "    doc_id: int | None\n"
        "    loaded: 'object'\n"
        "    extra: list[object] = field(default_factory=list)\n"
        "    plain: object = None  # noqa\n"
        "@dataclasses.dataclass(frozen=True)\n"
        "class Result:\n"
        "    history: object = True\n"
        "    stats: dict = None\n"
        "class NotARecord:\n"
        "    anything: object\n"
    )
    assert untyped_fields(sneaky) == [
        "Request.project",
        "Request.loaded",
        "Request.extra",
        "Request.plain",
        "Result.history",
    ]


# Third-party packages, and parts of them, that cost start-up time or may not be installed: a
# function-level import earns its place only by putting one of these off, or by being optional
# (tried, with `except ImportError`). A dotted entry is a part that costs far more than its
# package's own import: transformers' model and mask code (about 2 s), PyTorch's extension
# builder. llama_cpp and matplotlib are optional extras. filelock, tomlkit and tqdm are light but
# each adds 10-30 ms to every command's start (`swiftwriter --help` takes about 230 ms), for a
# shared file's lock, the registry's writer and the training's progress bars.
HEAVY_PACKAGES = frozenset(
    {
        "torch",
        "torch.utils.cpp_extension",
        "transformers",
        "transformers.modeling_utils",
        "transformers.masking_utils",
        "accelerate",
        "safetensors",
        "numpy",
        "gguf",
        "PySide6",
        "docx",
        "ebooklib",
        "huggingface_hub",
        "tokenizers",
        "jinja2",
        "llama_cpp",
        "matplotlib",
        "filelock",
        "tomlkit",
        "tqdm",
    }
)
LAZY = re.compile(r"#\s*lazy:\s*\S")


def package_files(root: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> its file, for every module of the package at `root`."""
    files = {}
    for path in root.rglob("*.py"):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (getattr(test, "id", None) or getattr(test, "attr", None)) == "TYPE_CHECKING"


def import_time_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports a module runs when it is imported: its body's, including those under `if`,
    `try`, `with` and class bodies, but not those in functions or under `if TYPE_CHECKING:`."""
    out = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                out.append(node)
            elif isinstance(node, ast.If) and _type_checking(node):
                visit(node.orelse)
            elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    visit([n for n in getattr(node, field, []) if isinstance(n, ast.stmt)])
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    return out


def function_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    out = []
    for func in ast.walk(tree):
        if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            for stmt in func.body:
                out += [n for n in ast.walk(stmt) if isinstance(n, ast.Import | ast.ImportFrom)]
    return sorted(set(out), key=lambda n: n.lineno)


def heavy_in(name: str) -> set[str]:
    """The HEAVY_PACKAGES that importing `name` (a dotted module, or a name in one) runs."""
    return {h for h in HEAVY_PACKAGES if name == h or name.startswith(h + ".")}


CATCHES_IMPORT_ERROR = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _optional_imports(tree: ast.Module) -> set[ast.AST]:
    """The imports that may fail: tried under `except ImportError` (or a broader except), or
    within `contextlib.suppress` of one of those."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            caught = [h.type or ast.Name("BaseException") for h in node.handlers]
        elif isinstance(node, ast.With):
            caught = [
                arg
                for item in node.items
                if isinstance(item.context_expr, ast.Call)
                and ast.unparse(item.context_expr.func).endswith("suppress")
                for arg in item.context_expr.args
            ]
        else:
            continue
        names = {ast.unparse(n).rpartition(".")[2] for c in caught for n in ast.walk(c)}
        if names & CATCHES_IMPORT_ERROR:
            for stmt in node.body:
                out |= {n for n in ast.walk(stmt) if isinstance(n, ast.Import | ast.ImportFrom)}
    return out


def import_targets(node: ast.Import | ast.ImportFrom, files: dict[str, Path]) -> set[str]:
    """What an import statement brings in: the package's modules it runs (with their parent
    packages) and the HEAVY_PACKAGES it imports."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        module = node.module or ""
        names = [f"{module}.{alias.name}" for alias in node.names]
    out = set()
    for name in names:
        if name.split(".")[0] not in files:
            out |= heavy_in(name)
            continue
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            if ".".join(parts[:i]) in files:
                out.add(".".join(parts[:i]))
    return out


def heavy_at_import(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the HEAVY_PACKAGES importing it pulls in: through its own import-time imports,
    its parent packages' and, transitively, those of the package's modules they import."""
    files = package_files(root)
    deps: dict[str, set[str]] = {}
    heavy: dict[str, set[str]] = {}
    for name, path in files.items():
        targets = set()
        for node in import_time_imports(ast.parse(path.read_text(encoding="utf-8"))):
            targets |= import_targets(node, files)
        parent = name.rpartition(".")[0]
        deps[name] = {t for t in targets if t in files} | ({parent} if parent else set())
        heavy[name] = targets - set(files)
    changed = True
    while changed:
        changed = False
        for name in files:
            more = set().union(*(heavy[d] for d in deps[name])) - heavy[name]
            if more:
                heavy[name] |= more
                changed = True
    return heavy


def lazy_import_violations(
    path: Path, module: str, heavy: dict[str, set[str]], files: dict[str, Path]
) -> list[str]:
    """The function-level imports of `module` (at `path`) that do not say why they wait
    (`# lazy: <reason>` on their first line) or that put off nothing heavy: a module of the
    package that pulls in no heavy package `module` does not already pull in, or a third-party
    package that is cheap or that `module` imports anyway, unless it is tried as optional (under
    `except ImportError` or `contextlib.suppress`)."""
    source = path.read_text(encoding="utf-8")
    comments = {
        tok.start[0]: tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    tree = ast.parse(source)
    optional = _optional_imports(tree)
    bad = []
    for node in function_level_imports(tree):
        what = ast.unparse(node)
        if not LAZY.search(comments.get(node.lineno, "")):  # a long import's first line
            bad.append(f"{node.lineno}: {what} unexplained")
            continue
        targets = import_targets(node, files)
        put_off = set().union(*(heavy[t] if t in files else {t} for t in targets))
        if node in optional and not any(t in files for t in targets):
            put_off.add("an optional package")
        if not put_off - heavy[module]:
            bad.append(f"{node.lineno}: {what} lazy for nothing")
    return bad


def test_function_level_imports_wait_only_for_what_is_heavy():
    """Imports sit at the top of a module unless waiting saves start-up time, and then they say
    so (issue 61): `# lazy: torch, only for a model`."""
    files = package_files()
    heavy = heavy_at_import()
    for name, path in sorted(files.items()):
        bad = lazy_import_violations(path, name, heavy, files)
        assert not bad, f"{path.relative_to(PACKAGE)}: {bad}"


def test_the_lazy_import_check_catches_an_idle_or_unexplained_wait(tmp_path):
    package = tmp_path / "swiftwriter"
    (package / "engine").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "engine" / "__init__.py").write_text("")
    (package / "engine" / "model.py").write_text("import torch\n")
    (package / "engine" / "settings.py").write_text("import json\n")
    (package / "words.py").write_text("import numpy as np\n")
    (package / "engine" / "native.py").write_text(
        "import torch\n"
        "def build():\n"
        "    from torch.utils.cpp_extension import load  # lazy: only to build a kernel\n"
        "    import torch  # lazy: torch\n"
        "    try:\n"
        "        import fcntl  # lazy: POSIX only\n"
        "    except ImportError:\n"
        "        fcntl = None\n"
        "    with contextlib.suppress(Exception):\n"
        "        import ninja  # lazy: optional, PATH may have one\n"
    )
    (package / "cli.py").write_text(
        "from swiftwriter import words\n"
        "def run():\n"
        "    from swiftwriter.engine import model  # lazy: torch, only to generate\n"
        "    import llama_cpp  # lazy: optional llama_cpp\n"
        "    from swiftwriter.engine.settings import (  # lazy: settings\n"
        "        Settings,\n"
        "    )\n"
        "    import json\n"
        "    import numpy  # lazy: numpy\n"
        "    from swiftwriter.engine import (\n"
        "        model,\n"
        "    )\n"
    )
    files = package_files(package)
    heavy = heavy_at_import(package)
    assert heavy["swiftwriter.cli"] == {"numpy"}
    assert lazy_import_violations(package / "cli.py", "swiftwriter.cli", heavy, files) == [
        "5: from swiftwriter.engine.settings import Settings lazy for nothing",
        "8: import json unexplained",
        "9: import numpy lazy for nothing",
        "10: from swiftwriter.engine import model unexplained",
    ]
    native = package / "engine" / "native.py"
    assert lazy_import_violations(native, "swiftwriter.engine.native", heavy, files) == [
        "4: import torch lazy for nothing"
    ]

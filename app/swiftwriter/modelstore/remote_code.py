"""A model added with `trust_remote_code` runs the Python files of its folder: transformers
copies them into its module cache and imports them from there. Both places must be this
user's alone, or another user could have put their code in them."""

from __future__ import annotations

from pathlib import Path

from swiftwriter import paths
from swiftwriter.errors import UserError


def check_remote_code(model_id: str, folder: Path) -> None:
    """Refuse, in one line, to run a model's own code that another user can have written."""
    from transformers.utils import HF_MODULES_CACHE  # lazy: transformers

    modules = paths.own_folder(Path(HF_MODULES_CACHE))  # 0700 when made here
    places = [Path(folder).resolve(), *sorted(Path(folder).resolve().glob("*.py"))]
    for place in places:
        real = place.resolve()  # a snapshot's files are links to its blobs: what is read
        _refuse(model_id, paths.unsafe_to_load(real, real.parent))
    _refuse(model_id, paths.unsafe_to_load(modules, modules))


def _refuse(model_id: str, why: str | None) -> None:
    if why is not None:
        raise UserError(
            f"Model '{model_id}' runs its own code (trust_remote_code), and {why}: it is not "
            "run until only you can write there"
        )

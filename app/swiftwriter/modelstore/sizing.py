"""Whether a model can fit this machine's memory, said from its config.json before anything
loads: a folder whose config declares a model far larger than its weights (hidden 16384, 48
layers) was added without a word, and loading it allocated the declared shapes until the
operating system killed the process. The weights' size is placement.estimate's, counted on an
empty (meta) copy of the model, so no weight is read or allocated; the copy is built only
for at most MAX_LAYERS layers, which bounds what the estimate itself costs.

A load on one device is refused when the weights alone exceed that device's memory (the RAM,
or the GPU's): it cannot succeed. Adding a folder is refused when even its bfloat16 weights
exceed all of the machine's memory together (RAM and GPUs, since it may be spread later): only
offloading most of it to disk could run it. A config transformers cannot build a model from
is not sized (its load fails on its own)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from swiftwriter.errors import UserError

log = logging.getLogger(__name__)

MAX_LAYERS = 1024  # the largest real models have under 200
MAX_CONFIG = 1 << 20  # bytes of config.json (a model's is a few kB)


def check_config_size(config: Path) -> None:
    """A config.json is read whole: one past MAX_CONFIG is refused before it is."""
    size = config.stat().st_size
    if size > MAX_CONFIG:
        raise UserError(f"{config} is {size:,} bytes, more than the {MAX_CONFIG:,} allowed")


def machine_memory() -> int | None:
    """Bytes of RAM, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def device_memory(device: str) -> int | None:
    """Bytes of memory on `device` (cpu, mps: the RAM; cuda:N: that GPU's), None if unknown."""
    if not device.startswith("cuda"):
        return machine_memory()
    import torch  # lazy: torch

    index = int(device.partition(":")[2] or torch.cuda.current_device())
    return torch.cuda.get_device_properties(index).total_memory


def all_memory() -> int | None:
    """The RAM and every GPU's memory together."""
    import torch  # lazy: torch

    ram = machine_memory()
    if ram is None:
        return None
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return ram + sum(torch.cuda.get_device_properties(i).total_memory for i in range(count))


def weights_bytes(folder: Path, dtype: str, trust_remote_code: bool = False) -> int | None:
    """Bytes the weights of the model in `folder` take in `dtype`, from its config.json alone;
    None when transformers cannot read that config or build the model from it (the load then
    says why: an estimate that fails refuses nothing)."""
    from transformers import AutoConfig  # lazy: transformers

    from swiftwriter.modelstore import placement  # lazy: pulls in numpy

    check_config_size(folder / "config.json")
    try:
        config = AutoConfig.from_pretrained(
            folder, local_files_only=True, trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.debug("no size for %s: %s", folder, exc)
        return None
    layers = getattr(config.get_text_config(), "num_hidden_layers", 0)
    if isinstance(layers, int) and layers > MAX_LAYERS:
        raise UserError(
            f"{folder / 'config.json'}: {layers:,} layers, more than the {MAX_LAYERS:,} allowed"
        )
    try:
        return placement.estimate(config, dtype, 0).total()
    except Exception as exc:  # noqa: BLE001 - any architecture's own error: no estimate
        log.debug("no size for %s: %s", folder, exc)
        return None


def check_fits(folder: Path, dtype: str, limit: int | None, where: str, trust: bool = False):
    """Refuse the model in `folder` when its weights in `dtype` exceed `limit` bytes (the
    memory `where` names)."""
    from swiftwriter.modelstore.placement import fmt_bytes  # lazy: pulls in numpy

    if limit is None:
        return
    need = weights_bytes(folder, dtype, trust)
    if need is not None and need > limit:
        raise UserError(
            f"{folder / 'config.json'}: its weights need {fmt_bytes(need)} in {dtype}, more "
            f"than the {fmt_bytes(limit)} of memory {where}"
        )


def check_addable(folder: Path, trust_remote_code: bool = False) -> None:
    """At `models add`: the weights fit all of this machine's memory in bfloat16. A folder
    that runs its own code is not sized here (that would run it): its load is."""
    if trust_remote_code or "auto_map" in _config(folder):
        return
    check_fits(folder, "bfloat16", all_memory(), "this machine has (RAM and GPUs together)")


def check_loadable(folder: Path, device: str, dtype: str, trust_remote_code: bool) -> None:
    """Before a load on one device: the weights in `dtype` fit that device's memory."""
    where = "this machine has" if not device.startswith("cuda") else f"{device} has"
    check_fits(folder, dtype, device_memory(device), where, trust_remote_code)


def _config(folder: Path) -> dict:
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}

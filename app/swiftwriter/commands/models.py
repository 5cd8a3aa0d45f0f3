"""`swiftwriter models`: list known models, convert the default one, add a local folder, measure
a model's CPU dtype, kernel and layout again."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from swiftwriter.errors import UserError
from swiftwriter.modelstore import provision, registry


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("models", help="list, prepare and add models")
    msub = parser.add_subparsers(dest="models_cmd")
    msub.add_parser("list", help="known models and whether each is ready")
    prep = msub.add_parser("prepare", help="convert the embedded default model (once)")
    prep.add_argument("model", nargs="?", help="registry id (default: the default model)")
    prep.add_argument("--force", action="store_true", help="convert again even if ready")
    measure = msub.add_parser(
        "measure", help="time a model's passes here again and say which dtype auto chooses"
    )
    measure.add_argument("model", nargs="?", help="registry id (default: the default model)")
    add = msub.add_parser("add", help="register a local Hugging Face model folder")
    add.add_argument("name")
    add.add_argument("folder")
    add.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow this one model to run its own Python code",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cmd = args.models_cmd or "list"
    if cmd == "list":
        for entry in registry.load_registry().values():
            mark = "*" if entry.default else " "
            where = entry.folder()
            print(f"{mark} {entry.id:28} {entry.status():14} {where}")
        return 0
    if cmd == "prepare":
        entry = registry.resolve(args.model)
        if entry.is_ready() and not args.force:
            print(f"{entry.id} is ready in {entry.folder()}")
            return 0
        provision.convert(entry, progress=lambda m: print(m, file=sys.stderr), force=args.force)
        print(f"{entry.id} is ready in {entry.folder()}")
        return 0
    if cmd == "measure":
        return measure_again(registry.resolve(args.model))
    entry = registry.add_user_model(args.name, Path(args.folder), args.trust_remote_code)
    print(f"Added {entry.id} -> {entry.folder()}")
    return 0


LABELS = {
    "kernel-2": "product kernel ({dtype}): {value}",
    "few-rows": "row-major weight copies ({dtype}): up to {value} rows",
}


def measure_again(entry) -> int:
    """Forget what was measured for this model here and measure it again: the passes in both
    dtypes and auto's choice, then the kernel and layout measured on the way, each said to be
    remembered or not (and why not)."""
    from swiftwriter.modelstore import loader, measurements

    if not entry.is_ready():
        raise UserError(f"Model '{entry.id}' is not ready ({entry.status()})")
    measurements.recent.clear()
    measurements.forget(entry.id)
    found = loader.cpu_dtype_choice(entry)
    for dtype, cost in sorted(loader.pass_costs(found.seconds).items()):
        passes = " · ".join(f"{rows}-token pass {loader.ms(t)}" for rows, t in sorted(cost.items()))
        print(f"{dtype:9} {passes}")
    print(f"auto chooses {found.value} ({loader.dtype_reason(found)})")
    for key, other in measurements.recent.items():
        if key != found.key:
            what, _, dtype = key.split("|")[:3]
            label = LABELS.get(what, what + " ({dtype}): {value}")
            print(label.format(dtype=dtype, value=other.value) + ", " + _kept(other))
    print(f"dtype choice: {_kept(found)}")
    return 0


def _kept(found) -> str:
    if found.remembered:
        return f"remembered ({found.date})"
    return "used for this run only, not remembered: " + "; ".join(found.unquiet)

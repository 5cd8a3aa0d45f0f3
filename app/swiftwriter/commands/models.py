"""`swiftwriter models`: list known models, convert the default one, add a local folder or a
GGUF file, measure a model's CPU dtype, kernel and layout again."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from swiftwriter import paths
from swiftwriter.bench import ggufgen
from swiftwriter.errors import UserError
from swiftwriter.modelstore import adding, auto_convert, loader, measurements, registry


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("models", help="list, prepare and add models")
    msub = parser.add_subparsers(dest="models_cmd")
    listing = msub.add_parser("list", help="known models and whether each is ready")
    listing.add_argument("--json", action="store_true", help="one JSON list, for scripts")
    prep = msub.add_parser("prepare", help="convert the embedded default model (once)")
    prep.add_argument("model", nargs="?", help="registry id (default: the default model)")
    prep.add_argument("--force", action="store_true", help="convert again even if ready")
    prep.add_argument(
        "--dtype",
        choices=DTYPES,
        help="store the weights in this dtype (default: what auto picks here); converts again "
        "when the stored dtype differs",
    )
    measure = msub.add_parser(
        "measure", help="time a model's passes here again and say which dtype auto chooses"
    )
    measure.add_argument("model", nargs="?", help="registry id (default: the default model)")
    add = msub.add_parser(
        "add",
        help="register a local Hugging Face model folder, or convert and register a GGUF file",
    )
    add.add_argument("name")
    add.add_argument("folder", metavar="FOLDER_OR_GGUF")
    add.add_argument(
        "--dtype",
        choices=DTYPES,
        default="auto",
        help="a GGUF's weights are stored in this dtype (default: what auto picks here)",
    )
    add.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow this one model to run its own Python code",
    )
    rand = msub.add_parser(
        "random",
        help="write a GGUF of random weights in a real model's shape and add it (for timing "
        "at sizes no download is needed for: its text is noise)",
    )
    rand.add_argument("name")
    rand.add_argument("--shape", default="smollm2-1.7b", help="smollm2-1.7b, smollm2-360m or tiny")
    rand.add_argument(
        "--type", default="Q4_K_M", help="Q4_K_M (llama.cpp's mixture), Q4_K, Q5_K, Q6_K, "
        "Q8_0, Q4_0 or Q4_1",
    )  # fmt: skip
    rand.add_argument("--seed", type=int, default=0)
    parser.set_defaults(func=run)


def add_random(name: str, shape: str, kind: str, seed: int) -> int:
    """The random model's file beside the models, then added like any GGUF (kept as stored)."""
    if shape not in ggufgen.SHAPES:
        raise UserError(f"Unknown shape '{shape}'; known: {', '.join(sorted(ggufgen.SHAPES))}")
    if kind not in ("Q4_K_M", *ggufgen.K_TYPES, "Q8_0", "Q4_0", "Q4_1"):
        raise UserError(f"Unknown type '{kind}' (Q4_K_M, Q4_K, Q5_K, Q6_K, Q8_0, Q4_0, Q4_1)")
    registry.check_new_id(name)
    folder = paths.own_folder(paths.models_dir() / "random")
    path = folder / f"{name}.gguf"
    _say(f"Writing {shape} as {kind} with random weights into {path}")
    size, seconds = ggufgen.write_random(path, shape, kind, seed)
    _say(f"Wrote {size:.2f} GiB in {seconds:.0f} s")
    entry = adding.add_gguf(name, path, progress=_say)
    print(f"Added {entry.id} -> {entry.folder()}")
    return 0


def run(args: argparse.Namespace) -> int:
    cmd = getattr(args, "models_cmd", None) or "list"
    if cmd == "list":
        return list_models(getattr(args, "json", False))
    if cmd == "prepare":
        return prepare(registry.resolve(args.model), args.force, args.dtype)
    if cmd == "measure":
        return measure_again(registry.resolve(args.model))
    if cmd == "random":
        return add_random(args.name, args.shape, args.type, args.seed)
    path = Path(args.folder)
    if adding.is_gguf_path(path):
        if args.trust_remote_code:
            raise UserError("--trust-remote-code is for folders: a GGUF runs no code of its own")
        entry = adding.add_gguf(args.name, path, args.dtype, progress=_say)
    else:
        entry = registry.add_user_model(args.name, path, args.trust_remote_code)
    print(f"Added {entry.id} -> {entry.folder()}")
    return 0


DTYPES = ("auto", "stored", "float32", "bfloat16", "float16")


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def list_models(as_json: bool) -> int:
    entries = list(registry.load_registry().values())
    if as_json:
        rows = [
            {
                "id": e.id,
                "name": e.name,
                "default": e.default,
                "user": e.user,
                "source": e.source,
                "status": e.status(),
                "folder": str(e.folder()),
                "stored_dtype": e.stored_dtype(),
                "file": e.file,
                "architecture": e.architecture,
                "context_length": e.context_length,
                "chat_template": bool(e.chat_template),
            }  # fmt: skip
            for e in entries
        ]
        print(json.dumps(rows, indent=2))
        return 0
    for entry in entries:
        mark = "*" if entry.default else " "
        status = entry.status()
        if status == "ready" and entry.stored_dtype():
            status += f" ({entry.stored_dtype()})"
        print(f"{mark} {entry.id:28} {status:20} {entry.folder()}")
    return 0


def prepare(entry, force: bool, dtype: str | None) -> int:
    """Convert when not ready, when forced, or when a dtype is asked for that the folder is
    not stored in; otherwise say where it is."""
    asked = None if dtype in (None, "auto") else dtype
    again = force or (asked is not None and entry.stored_dtype() not in (None, asked))
    if entry.is_ready() and not again:
        print(f"{entry.id} is ready in {entry.folder()} ({entry.stored_dtype() or 'as it is'})")
        return 0
    auto_convert.convert(entry, progress=_say, force=again, dtype=asked)
    print(f"{entry.id} is ready in {entry.folder()} ({entry.stored_dtype()})")
    return 0


LABELS = {
    "kernel-2": "product kernel ({dtype}): {value}",
    "few-rows": "row-major weight copies ({dtype}): up to {value} rows",
}


def measure_again(entry) -> int:
    """Forget what was measured for this model here and measure it again: the passes in both
    dtypes and auto's choice, then the kernel and layout measured on the way, each said to be
    remembered or not (and why not)."""
    if not entry.is_ready():
        raise UserError(f"Model '{entry.id}' is not ready ({entry.status()})")
    measurements.recent.clear()
    measurements.forget(entry.id)
    found = loader.cpu_dtype_choice(entry, even_busy=True)  # asked for: measured even busy
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

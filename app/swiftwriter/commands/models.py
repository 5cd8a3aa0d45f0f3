"""`swiftwriter models`: list known models, convert the default one, add a local folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from swiftwriter.modelstore import provision, registry


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("models", help="list, prepare and add models")
    msub = parser.add_subparsers(dest="models_cmd")
    msub.add_parser("list", help="known models and whether each is ready")
    prep = msub.add_parser("prepare", help="convert the embedded default model (once)")
    prep.add_argument("model", nargs="?", help="registry id (default: the default model)")
    prep.add_argument("--force", action="store_true", help="convert again even if ready")
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
    entry = registry.add_user_model(args.name, Path(args.folder), args.trust_remote_code)
    print(f"Added {entry.id} -> {entry.folder()}")
    return 0

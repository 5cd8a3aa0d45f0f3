"""The `swiftwriter` command: alone it opens the app; subcommands work headless."""

from __future__ import annotations

import argparse
import os
import sys

from swiftwriter import __version__
from swiftwriter.commands import bench, export, generate, heads, models, project
from swiftwriter.errors import UserError, printable

COMMANDS = [generate, models, heads, bench, export, project]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="swiftwriter",
        description="SwiftWriter: long-form writing with lossless TokenSwift acceleration. "
        "Without a command it opens the desktop app.",
    )
    parser.add_argument("--version", action="version", version=f"swiftwriter {__version__}")
    parser.add_argument("--model", help="model for the app (registry id or folder)")
    parser.add_argument("--project", help="project file to open in the app")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    # `swiftwriter PROJECT` (the .desktop file's %f): a lone existing project opens the app on it
    lone = len(argv) == 1 and argv[0].endswith(".swiftwriter") and os.path.isfile(argv[0])
    args = parser.parse_args([] if lone else argv)
    try:
        if args.command is None:
            from swiftwriter.ui.app import run_app

            return run_app(model=args.model, project=argv[0] if lone else args.project)
        return args.func(args) or 0
    except UserError as exc:
        print(f"swiftwriter: {printable(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("swiftwriter: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:  # noqa: BLE001 - one line here, the traceback in the log
        from swiftwriter import logs

        line = logs.unexpected(args.command or "SwiftWriter", exc)
        print(f"swiftwriter: {printable(line)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

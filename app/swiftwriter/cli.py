"""The `swiftwriter` command: alone it opens the app; subcommands work headless.

Exit status: 0 done, 1 a user error (a missing project, model or file, a bad value: one line on
stderr), 2 a usage error (argparse's, or arguments that contradict each other)."""

from __future__ import annotations

import argparse
import os
import sys

from swiftwriter import __version__, logs
from swiftwriter.commands import bench, export, generate, heads, models, project, rewrite
from swiftwriter.commands.common import renamed
from swiftwriter.errors import UsageError, UserError, is_native_panic, printable
from swiftwriter.ui import app as desktop

COMMANDS = [generate, rewrite, models, heads, bench, export, project]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="swiftwriter",
        usage="%(prog)s [--model MODEL] [PROJECT | COMMAND ...]",
        description="SwiftWriter: long-form writing with lossless TokenSwift acceleration. "
        "Without a command it opens the desktop app (on PROJECT, a .swiftwriter file, when "
        "one is named).",
        epilog="Exit status: 0 done, 1 a user error (a missing project, model or file, a value "
        "refused; one line on stderr), 2 a usage error.",
    )
    parser.add_argument("--version", action="version", version=f"swiftwriter {__version__}")
    parser.add_argument(
        "--model",
        dest="global_model",
        metavar="MODEL",
        help="model for the app or for the command that follows (registry id or folder)",
    )
    # the old spelling of `swiftwriter PROJECT`
    parser.add_argument("--project", dest="app_project", help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
    return parser


def _lone_project(argv: list[str]) -> str | None:
    """`swiftwriter [--model MODEL] PROJECT` (the .desktop file's %f): an existing project file
    last, after nothing but the global model, opens the app on it."""
    if not argv or not argv[-1].endswith(".swiftwriter") or not os.path.isfile(argv[-1]):
        return None
    before = argv[:-1]
    alone = not before or (len(before) == 2 and before[0] == "--model")
    return argv[-1] if alone or (len(before) == 1 and before[0].startswith("--model=")) else None


def _global_model(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """`swiftwriter --model X COMMAND`: X is the command's model, as `COMMAND --model X` (or
    its MODEL argument) would be; a command that loads no model refuses it."""
    model = args.global_model
    if model is None or args.command is None:
        return
    if not hasattr(args, "model"):
        parser.error(f"--model: `{args.command}` loads no model")
    if args.model not in (None, model):
        parser.error(
            f"--model given twice: '{model}' before `{args.command}`, '{args.model}' after"
        )
    args.model = model


def _no_empty_model(args: argparse.Namespace) -> None:
    """`--model ''` (a script's unset variable) is refused, never taken for the default model."""
    if "" in (args.global_model, getattr(args, "model", None)):
        raise UserError(
            "--model is empty: name a registered model or a model folder, or leave --model out "
            "for the default model"
        )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    lone = _lone_project(argv)
    args = parser.parse_args(argv[:-1] if lone else argv)
    if args.app_project is not None and args.command is not None:
        parser.error(f"--project opens a project in the app: it does not go with `{args.command}`")
    _global_model(parser, args)
    try:
        _no_empty_model(args)
        if args.command is None:
            project = renamed(lone, args.app_project, "--project PROJECT", "swiftwriter PROJECT")
            return desktop.run_app(model=args.global_model, project=project)
        return args.func(args) or 0
    except UsageError as exc:
        print(f"swiftwriter: {printable(exc)}", file=sys.stderr)
        return 2
    except UserError as exc:
        print(f"swiftwriter: {printable(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("swiftwriter: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except BaseException as exc:  # noqa: BLE001 - one line here, the traceback in the log
        if not isinstance(exc, Exception) and not is_native_panic(exc):
            raise  # SystemExit and the like

        line = logs.unexpected(args.command or "SwiftWriter", exc)
        print(f"swiftwriter: {printable(line)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

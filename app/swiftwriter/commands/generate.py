"""`swiftwriter generate`: continue a prompt file and write the continuation to stdout."""

from __future__ import annotations

import argparse
import sys

from swiftwriter.commands.common import non_negative_float, positive_int, read_text_file


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("generate", help="continue a prompt and print the continuation")
    parser.add_argument("--prompt-file", required=True, help="UTF-8 text file with the prompt")
    parser.add_argument("--max-new-tokens", type=positive_int, default=256)
    parser.add_argument("--model", help="registry id or model folder (default: the default model)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument(
        "--penalty",
        type=non_negative_float,
        default=1.2,
        help="contextual repetition penalty theta (1.0 = off)",
    )
    parser.add_argument(
        "--window", type=positive_int, default=1024, help="penalty window W in tokens"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    prompt = read_text_file(args.prompt_file)
    from swiftwriter.modelstore import loader, registry

    entry = registry.resolve(args.model)
    loaded = loader.load(entry, device=args.device, dtype=args.dtype)
    from swiftwriter.engine.textgen import stream_text

    for piece in stream_text(
        loaded, prompt, args.max_new_tokens, penalty=args.penalty, window=args.window
    ):
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")
    return 0

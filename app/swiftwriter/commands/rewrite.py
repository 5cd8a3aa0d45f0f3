"""`swiftwriter rewrite`: the app's selection tools from the command line. A passage (a text
file, or its last part) rewritten, described, expanded, shortened or changed by an instruction
into several alternatives written together; `--bench` times them against one alone and checks
each against plain decoding of its seed."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from swiftwriter.commands.common import add_encoding, positive_int, read_text_file
from swiftwriter.engine.decoding.settings import SAMPLERS, DraftSettings
from swiftwriter.errors import UserError
from swiftwriter.writing.alternatives import TOOLS, write_alternatives


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "rewrite",
        help="rewrite a passage into several alternatives at once (the app's selection tools)",
        description="Rewrite a passage (a text file, or its last --chars characters) into "
        "several alternatives written together in one batched run; each is exactly what the "
        "model writes alone for its seed. The text before the passage in the file is read as "
        "the story so far.",
    )
    parser.add_argument("file", metavar="FILE", help="text file holding the passage")
    parser.add_argument("--tool", choices=tuple(TOOLS), default="rewrite",
                        help="rewrite (default), describe (more sensory detail), expand, "
                        "shorten, or custom (with --instruction)")  # fmt: skip
    parser.add_argument("--instruction", default="", help="the custom tool's words, or words "
                        "added to another tool's (\"make it tenser\")")  # fmt: skip
    parser.add_argument("--chars", type=positive_int, metavar="N",
                        help="the passage is the file's last N characters (default: all)")  # fmt: skip
    parser.add_argument("--alternatives", type=positive_int, default=3, metavar="N",
                        help="how many alternatives (1 to 8; default 3)")  # fmt: skip
    parser.add_argument("--seeds", type=int, nargs="+", metavar="SEED",
                        help="one seed per alternative (default: fresh ones, printed)")  # fmt: skip
    parser.add_argument("--tokens", type=positive_int, metavar="N",
                        help="tokens per alternative at most (default: from the tool and the "
                        "passage's length)")  # fmt: skip
    parser.add_argument("--sampler", choices=tuple(SAMPLERS), default=None,
                        help="same-text (default: each alternative is plain decoding's text "
                        "for its seed) or fastest")  # fmt: skip
    parser.add_argument("--bench", action="store_true",
                        help="time the alternatives together against one alone, each exactly "
                        "--tokens long (default 200), and check each against plain decoding "
                        "of its seed")  # fmt: skip
    parser.add_argument("--rounds", type=positive_int, default=2,
                        help="--bench: turns of one and of all (the fastest kept; default 2)")  # fmt: skip
    parser.add_argument("--json", metavar="FILE", help="--bench: also write the report here")
    parser.add_argument("--model", help="model (default: the default model)")
    parser.add_argument("--dtype", default="auto", help="auto (default), stored, bfloat16, "
                        "float16 or float32, as for generate")  # fmt: skip
    add_encoding(parser)
    parser.set_defaults(func=run)


def _passage(args: argparse.Namespace) -> tuple[str, str]:
    """(the story so far, the passage) from the file."""
    text = read_text_file(args.file, args.encoding)
    if not text.strip():
        raise UserError(f"{args.file} holds no text: there is nothing to rewrite")
    cut = len(text) - args.chars if args.chars else 0
    return text[: max(0, cut)], text[max(0, cut) :]


def run(args: argparse.Namespace) -> int:
    if args.seeds is not None and len(args.seeds) != args.alternatives:
        raise UserError(
            f"--seeds names {len(args.seeds)} seeds for {args.alternatives} alternatives"
        )
    if args.tool == "custom" and not args.instruction.strip():
        raise UserError("--tool custom needs --instruction, such as 'make it tenser'")
    before, passage = _passage(args)
    from swiftwriter.modelstore import (  # lazy: pulls in numpy (torch once a model loads), only once the options hold
        loader,
        registry,
    )

    loaded = loader.load(registry.resolve(args.model), dtype=args.dtype)
    drafting = DraftSettings()
    if args.sampler is not None:
        drafting = replace(drafting, sampler=args.sampler)
    if args.bench:
        return _bench(args, loaded, before, passage, drafting)
    result = write_alternatives(
        loaded, args.tool, passage, before=before, instruction=args.instruction,
        count=args.alternatives, seeds=args.seeds, drafting=drafting, max_new_tokens=args.tokens,
    )  # fmt: skip
    for i, alt in enumerate(result.alternatives, start=1):
        sys.stdout.write(f"--- alternative {i} (seed {alt.seed}) ---\n{alt.text}\n\n")
    tokens = sum(len(alt.token_ids) for alt in result.alternatives)
    print(f"{len(result.alternatives)} alternatives, {tokens} tokens in {result.seconds:.1f} s",
          file=sys.stderr)  # fmt: skip
    return 0


def _bench(args, loaded, before: str, passage: str, drafting) -> int:
    from swiftwriter.bench.alternatives import (  # lazy: pulls in torch, transformers, numpy
        bench_alternatives,
        format_report,
    )

    report = bench_alternatives(
        loaded, args.tool, passage, before=before, count=args.alternatives,
        tokens=args.tokens or 200, seeds=args.seeds, drafting=drafting, rounds=args.rounds,
    )  # fmt: skip
    print(format_report(report))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({**report, "same": {str(k): v for k, v in report["same"].items()}}, out,
                      indent=2)  # fmt: skip
    return 0 if all(report["same"].values()) else 1

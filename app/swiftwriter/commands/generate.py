"""`swiftwriter generate`: continue a prompt file, or a document of a project, and write the
continuation to stdout. With a project the text is also appended to the document and the
generation recorded (streamed into the file as it goes, so a crash loses at most a second)."""

from __future__ import annotations

import argparse
import sys

from swiftwriter.commands.common import non_negative_float, positive_int, read_text_file
from swiftwriter.errors import UserError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("generate", help="continue a prompt and print the continuation")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt-file", help="UTF-8 text file with the prompt")
    source.add_argument("--project", help="project file: continue the document --doc")
    parser.add_argument("--doc", help="with --project: document id or exact title")
    parser.add_argument(
        "--no-history",
        action="store_true",
        help="with --project: do not draft from the project's earlier text",
    )
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
    parser.add_argument(
        "--context-policy",
        choices=("stop", "slide"),
        default="stop",
        help="at the model's context limit: stop with a message, or slide a window that keeps "
        "the first tokens, pinned notes and the recent text (exact w.r.t. the windowed model)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.project is not None:
        return run_project(args)
    if args.doc is not None:
        raise UserError("--doc goes with --project")
    prompt = read_text_file(args.prompt_file)
    from swiftwriter.modelstore import loader, registry

    entry = registry.resolve(args.model)
    loaded = loader.load(entry, device=args.device, dtype=args.dtype)
    from swiftwriter.engine.settings import ContextSettings
    from swiftwriter.engine.textgen import stream_text

    for piece in stream_text(
        loaded,
        prompt,
        args.max_new_tokens,
        penalty=args.penalty,
        window=args.window,
        context=ContextSettings(policy=args.context_policy),
    ):
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")
    return 0


def run_project(args: argparse.Namespace) -> int:
    """Continue a project's document: everything is checked before the model loads."""
    if args.doc is None:
        raise UserError("--project needs --doc (a document id or title)")
    from swiftwriter.commands.project import find_document
    from swiftwriter.engine.settings import ContextSettings, SamplingSettings
    from swiftwriter.store import Project

    with Project.open(args.project) as proj:
        doc_id = find_document(proj, args.doc)
        sampling = SamplingSettings(greedy=True, penalty=args.penalty, window=args.window)
        from swiftwriter.modelstore import loader, registry

        entry = registry.resolve(args.model)
        loaded = loader.load(entry, device=args.device, dtype=args.dtype)
        from swiftwriter.session import generate_into_document

        def show(piece: str) -> None:
            sys.stdout.write(piece)
            sys.stdout.flush()

        result = generate_into_document(
            proj,
            doc_id,
            loaded,
            sampling=sampling,
            max_new_tokens=args.max_new_tokens,
            history=not args.no_history,
            context=ContextSettings(policy=args.context_policy),
            on_text=show,
        )
        sys.stdout.write("\n")
        stats = result.stats
        where = (
            f"appended to '{result.document.title}'" if result.document else "kept in the history"
        )
        print(
            f"generation #{result.generation.id}: {stats.get('tokens', 0)} tokens {where}; "
            f"tau {stats.get('tau', 0):.2f}, {stats.get('tokens_per_s', 0):.1f} tokens/s",
            file=sys.stderr,
        )
    return 0

"""`swiftwriter generate`: continue a prompt file (`--prompt-file FILE`), or a document of a
project (`generate PROJECT DOC`), and write the continuation to stdout. With a project the text is
also appended to the document and the generation recorded (streamed into the file as it goes, so
a crash loses at most a second)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from swiftwriter.commands.common import (
    add_encoding,
    add_model_options,
    modes_help,
    non_negative_float,
    positive_float,
    positive_int,
    read_text_file,
    renamed,
    sampler_overrides,
)
from swiftwriter.commands.heads import drafting_without
from swiftwriter.commands.project import find_document
from swiftwriter.engine.decoding.settings import (
    DEFAULT_MODE,
    DEFAULT_SAMPLER,
    MODES,
    SAMPLERS,
    ContextSettings,
    DraftSettings,
)
from swiftwriter.errors import UsageError, UserError
from swiftwriter.modelstore import registry
from swiftwriter.store import Project
from swiftwriter.writing.context import fitted
from swiftwriter.writing.endings import TakeEnding, parse_stops


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "generate",
        help="continue a prompt or a project's document and print the continuation",
        description="Continue a project's document (PROJECT DOC: the text is appended to it and "
        "recorded in the project), or a prompt file (--prompt-file FILE).",
    )
    for add_group in _OPTION_GROUPS:  # in this order: --help lists the options as they come
        add_group(parser)
    parser.set_defaults(func=run)


def _add_source_options(parser: argparse.ArgumentParser) -> None:
    """What is continued: a project's document, or a prompt file."""
    parser.add_argument("project", nargs="?", metavar="PROJECT", help="project file")
    parser.add_argument("doc", nargs="?", metavar="DOC", help="document id or exact title")
    parser.add_argument("--prompt-file", metavar="FILE", help="instead: continue this text file")
    add_encoding(parser)
    # the old spellings of PROJECT and DOC, kept for writers' scripts
    parser.add_argument("--project", dest="project_option", help=argparse.SUPPRESS)
    parser.add_argument("--doc", dest="doc_option", help=argparse.SUPPRESS)


def _add_project_options(parser: argparse.ArgumentParser) -> None:
    """What the model sees of a project: its history, a direction, the earlier documents."""
    parser.add_argument(
        "--no-history",
        action="store_true",
        help="with PROJECT: do not draft from the project's earlier text",
    )
    parser.add_argument(
        "--direction",
        default="",
        help="with PROJECT: what happens next (wrapped by the model's chat template, or an "
        "author's note above the end of the text)",
    )
    parser.add_argument(
        "--story-context",
        choices=("none", "previous", "fit"),
        default="fit",
        help="with PROJECT: the earlier documents the model sees (default: as many as fit)",
    )
    parser.add_argument(
        "--show-context",
        action="store_true",
        help="with PROJECT: print what the model would be given, part by part, and exit",
    )


def _add_sampler_options(parser: argparse.ArgumentParser) -> None:
    """The length, the writing mode and the sampler's values in place of the mode's."""
    parser.add_argument("--max-new-tokens", type=positive_int, default=256)
    parser.add_argument(
        "--min-new-tokens",
        type=int,
        default=0,
        metavar="N",
        help="end-of-text is not allowed before N tokens (N = --max-new-tokens: keep writing to "
        "the full length)",
    )
    parser.add_argument(
        "--preset",
        choices=sorted(MODES),
        help=f"the app's writing mode (default {DEFAULT_MODE}, as in the app): "
        f"{modes_help()}; --temperature, --top-p, --min-p, --penalty, --window and --dry "
        "change one of its values",
    )
    # the old spelling of --preset precise / creative, kept for writers' scripts
    parser.add_argument("--sampling", choices=("greedy", "sample"), help=argparse.SUPPRESS)
    parser.add_argument("--temperature", type=positive_float, help="sampled text only")
    parser.add_argument("--top-p", type=positive_float, help="sampled text only")
    parser.add_argument("--min-p", type=non_negative_float, help="sampled text only")
    parser.add_argument(
        "--seed", type=int, default=None, help="sampled text only (default: random)"
    )
    parser.add_argument(
        "--sampler",
        choices=SAMPLERS,
        default=DEFAULT_SAMPLER,
        help=f"sampled text only (default {DEFAULT_SAMPLER}, as in the app): same-text writes "
        "plain decoding's text for a seed; fastest accepts more drafts by rejection sampling, "
        "the model's distribution exactly but another text for a seed",
    )


def _add_ending_options(parser: argparse.ArgumentParser) -> None:
    """Where the take ends: at the length exactly, or at a stop text."""
    parser.add_argument(
        "--exact-length",
        action="store_true",
        help="stop at exactly --max-new-tokens (default: run on to the next sentence end, at "
        "most 10%% or 64 tokens more)",
    )
    parser.add_argument(
        "--stop",
        action="append",
        default=[],
        metavar="TEXT",
        help="end the take once this text is written (repeatable; 're:PATTERN' for a regular "
        "expression, e.g. 're:^Chapter [0-9]+'); with --project the project's own stop "
        "sequences apply too",
    )


def _add_placement_options(parser: argparse.ArgumentParser) -> None:
    """The model and where it runs, spread over devices with accelerate when asked."""
    add_model_options(parser)
    parser.add_argument(
        "--device-map",
        choices=["auto"],
        help="spread the model with accelerate over the GPUs, the CPU and disk (offload)",
    )
    parser.add_argument(
        "--max-memory",
        default="",
        help="with --device-map auto: limits per device, e.g. cuda:0=20GiB,cpu=64GiB; room is "
        "kept for the KV cache of the take, and what does not fit goes to disk",
    )
    parser.add_argument("--offload-folder", help="where disk-offloaded weights go")


def _add_penalty_options(parser: argparse.ArgumentParser) -> None:
    """The repetition penalties and their window."""
    parser.add_argument(
        "--penalty",
        type=non_negative_float,
        help="contextual repetition penalty theta (1.0 = off; default: the preset's)",
    )
    parser.add_argument(
        "--dry",
        type=non_negative_float,
        metavar="MULT",
        help="DRY multiplier against passages written again (0 = off; default: the preset's)",
    )
    parser.add_argument(
        "--window", type=positive_int, help="penalty window W in tokens (default: the preset's)"
    )


def _add_context_options(parser: argparse.ArgumentParser) -> None:
    """What happens at the model's context limit, or at a smaller one."""
    parser.add_argument(
        "--context-policy",
        choices=("stop", "slide"),
        help="at the model's context limit: stop with a message (the default), or slide a "
        "window that keeps the first tokens, pinned notes and the recent text (exact w.r.t. the "
        "windowed model; the default with --context-limit)",
    )
    parser.add_argument(
        "--context-limit",
        type=positive_int,
        metavar="TOKENS",
        help="a window smaller than the model's context (8 tokens or more): a take slides as a "
        "long one would, and in a project what slides out goes into the document's rolling "
        "summary after the take",
    )
    parser.add_argument(
        "--slide-mode",
        choices=("shift", "reprefill"),
        default="shift",
        help="how the window slides: shift edits the KV cache (no prefill), reprefill re-reads "
        "the window (a model whose rotary cannot be moved exactly re-reads it either way)",
    )


_OPTION_GROUPS = (
    _add_source_options,
    _add_project_options,
    _add_sampler_options,
    _add_ending_options,
    _add_placement_options,
    _add_penalty_options,
    _add_context_options,
)


def _source(args: argparse.Namespace) -> None:
    """PROJECT and DOC, also from their old spellings (`--project P --doc D`, one line saying
    the new form); exactly one of a project or a prompt file."""
    if args.project_option is not None:
        if args.doc is not None:
            raise UsageError("the project is named twice: write generate PROJECT DOC")
        args.project, args.doc = args.project_option, args.project  # `--project P D`: D is DOC
    if args.doc_option is not None:
        if args.doc is not None:
            raise UsageError("the document is named twice: write generate PROJECT DOC")
        args.doc = args.doc_option
    if args.project_option is not None or args.doc_option is not None:
        print(
            "swiftwriter: generate --project P --doc D is deprecated: write generate P D",
            file=sys.stderr,
        )
    if (args.project is None) == (args.prompt_file is None):
        raise UsageError("give a PROJECT and DOC to continue, or --prompt-file FILE (not both)")
    if args.project is None and (args.doc or args.direction or args.show_context):
        raise UsageError("DOC, --direction and --show-context go with a PROJECT")
    if args.project is not None and args.encoding is not None:
        raise UsageError("--encoding goes with --prompt-file (a project is always UTF-8)")
    if args.project is not None and args.doc is None:
        raise UsageError("generate PROJECT needs a DOC (a document id or title)")


def run(args: argparse.Namespace) -> int:
    _source(args)
    _preset(args)
    if args.project is not None:
        return run_project(args)
    _, _, ending = _placement(args), _sampling(args), _ending(args)  # bad options fail early
    prompt = read_text_file(args.prompt_file, args.encoding)
    if not prompt.strip():
        raise UserError(f"{args.prompt_file} holds no text: there is nothing to continue")

    entry = registry.resolve(args.model)
    loaded = _load(args, entry, prompt, ending.limit)
    take = _request(args, None, None, loaded, prompt, ending)  # a take outside any project
    _prompt_fits(take, args.prompt_file)
    _say_precision(loaded)
    _say_drafter(loaded, history=False)
    take.run()
    sys.stdout.write("\n")
    return 0


def _prompt_fits(take, prompt_file: str) -> None:
    """A prompt file longer than the model's context is refused in one line naming it, before
    anything else is said (its end alone is tokenized to know: session.PromptSession)."""
    from swiftwriter.writing.session import (  # lazy: pulls in torch, transformers, jinja2, numpy
        PromptTooLong,
    )

    try:
        take.session.build_prompt()
    except PromptTooLong as exc:
        raise UserError(f"{Path(prompt_file).name}: {exc}") from None


def _request(args: argparse.Namespace, project, doc_id, loaded, prompt_text, ending):
    """The take both forms of `generate` run (take.Take), printing its text as it comes."""
    from swiftwriter.writing.history import ProjectHistory  # lazy: pulls in torch, numpy
    from swiftwriter.writing.take import (  # lazy: pulls in torch, transformers, jinja2, numpy
        Take,
        TakeRequest,
    )

    def show(piece: str) -> None:
        sys.stdout.write(piece)
        sys.stdout.flush()

    request = TakeRequest(
        project,
        doc_id,
        loaded,
        prompt_text=prompt_text,
        target=ending.target,
        sampling=_sampling(args),
        drafting=DraftSettings(sampler=args.sampler),
        context=ContextSettings(
            policy=args.context_policy or ("slide" if args.context_limit else "stop"),
            slide_mode=args.slide_mode,
            limit=args.context_limit,
        ),
        history=None
        if project is None or args.no_history
        else ProjectHistory.of(project, loaded.tokenizer),
        measure_baseline=False,
        direction=args.direction,
        story_mode=args.story_context,
        ending=ending,
    )
    return Take(request, on_text=show)


def _say_precision(loaded) -> None:
    """The dtype on stderr, with how `auto` chose it (a stand-in model may not say)."""
    precision = getattr(loaded, "precision", None)
    if precision is not None:
        from swiftwriter.engine.passes import (  # lazy: pulls in torch, transformers, numpy
            precision_line,
        )

        print(precision_line(precision(), loaded.model), file=sys.stderr)


def _say_drafter(loaded, history: bool) -> None:
    """Without a usable drafter, which sources still draft (one line on stderr)."""
    line = drafting_without(getattr(loaded, "drafter_status", ""), history)
    if line is not None and getattr(loaded, "drafter", None) is None:
        print(line, file=sys.stderr)


def _placement(args: argparse.Namespace):
    from swiftwriter.modelstore.placement import Placement, parse_max_memory  # lazy: pulls in numpy

    limits = parse_max_memory(args.max_memory) if args.max_memory else {}
    return Placement(args.device, args.device_map, limits, args.offload_folder)


def _load(args: argparse.Namespace, entry, prompt_text: str | None, max_new_tokens: int):
    """The model placed as asked; a spread model keeps room for this take's KV cache: a prompt
    file's tokens (as far as the model's context reaches) plus the tokens asked for, or the
    whole context for a project's take (`prompt_text` None: its story context may fill it)."""
    from swiftwriter.modelstore import loader  # lazy: pulls in numpy

    placement = _placement(args)
    if not placement.spread:
        return loader.load(entry, device=args.device, dtype=args.dtype)
    if prompt_text is None:
        return loader.load_placed(entry, placement, dtype=args.dtype)
    from transformers import AutoConfig, AutoTokenizer  # lazy: transformers

    from swiftwriter.engine.decoding.generator import (  # lazy: pulls in torch, transformers, numpy
        context_length,
    )
    from swiftwriter.writing.history import encoder_of  # lazy: pulls in torch, numpy

    folder = entry.folder()
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    window = context_length(AutoConfig.from_pretrained(folder, local_files_only=True))
    prompt = fitted(encoder_of(tokenizer), prompt_text, window or (1 << 30))
    context = len(prompt.ids) + max_new_tokens + 1
    return loader.load_placed(entry, placement, dtype=args.dtype, context=context)


def _ending(args: argparse.Namespace):
    if not 0 <= args.min_new_tokens <= args.max_new_tokens:
        raise UserError(
            f"--min-new-tokens must be between 0 and --max-new-tokens ({args.max_new_tokens}), "
            f"not {args.min_new_tokens}"
        )
    return TakeEnding(
        args.max_new_tokens,
        min_new_tokens=args.min_new_tokens,
        finish_sentence=not args.exact_length,
        stops=parse_stops(args.stop),
    )


def _preset(args: argparse.Namespace) -> None:
    """The preset from --preset or its old spelling, --sampling (one line saying the new form),
    else the app's default."""
    old = {"greedy": "precise", "sample": "creative"}.get(args.sampling)
    chosen = renamed(args.preset, old, f"--sampling {args.sampling}", f"--preset {old}")
    args.preset, args.sampling = chosen or DEFAULT_MODE, None


def _sampling(args: argparse.Namespace):
    """The preset's settings (the app's own), with each value given on the command line."""
    name = args.preset or DEFAULT_MODE
    mode = MODES[name]
    given = sampler_overrides(args, mode.greedy, f"--preset {name}")
    if mode.greedy and args.seed is not None:
        raise UserError(f"--seed applies to sampled text, and --preset {name} is greedy decoding")
    return replace(mode, **given, seed=args.seed)


def run_project(args: argparse.Namespace) -> int:
    """Continue a project's document: everything is checked before the model loads."""
    _, _, ending = _placement(args), _sampling(args), _ending(args)
    with Project.open(args.project) as proj:
        doc_id = find_document(proj, args.doc)

        entry = registry.resolve(args.model)
        loaded = _load(args, entry, None, ending.limit)
        _say_precision(loaded)
        _say_drafter(loaded, history=not args.no_history)
        take = _request(args, proj, doc_id, loaded, None, ending)
        if args.show_context:
            print(take.session.story_context().render())
            return 0
        outcome = take.run()
        result = outcome.result
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
        if outcome.summary_line:
            print(outcome.summary_line, file=sys.stderr)
            summary = proj.summary(doc_id)
            if summary.text and summary.source == "model":
                print(f"rolling summary of '{result.document.title if result.document else doc_id}': "
                      f"{summary.text}", file=sys.stderr)  # fmt: skip
    return 0

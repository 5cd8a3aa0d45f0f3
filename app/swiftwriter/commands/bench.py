"""`swiftwriter bench`: the speed benchmark, every method side by side in one process."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from swiftwriter import paths
from swiftwriter.bench import llamacpp, suite
from swiftwriter.bench.suite import format_hits
from swiftwriter.commands.common import (
    add_encoding,
    add_model_options,
    modes_help,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    read_text_file,
    renamed,
    sampler_overrides,
)
from swiftwriter.commands.heads import drafting_without
from swiftwriter.engine.decoding.settings import (
    MODES,
    STRATEGIES,
    ContextSettings,
    SamplingSettings,
)
from swiftwriter.engine.decoding.textgen import encode
from swiftwriter.errors import UserError
from swiftwriter.modelstore import registry
from swiftwriter.store import Project
from swiftwriter.writing.guards import story_only_bans

TOKENSWIFT_MIN_P = 0.1  # without --preset, sampling is TokenSwift's sampler: temperature 1

PARTIAL_BUDGET = 1024  # --draft-mode pass: KV tokens per head the draft pass attends to
METHODS = "hf,hf-lookup,ar,tokenswift-noheads,tokenswift"
SLIDE_METHODS = "ar,tokenswift"  # hf cannot slide a window
SEGMENT = 2000  # the marathon's segment (bench/marathon.py), on by default with a sliding window


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="compare plain and accelerated decoding side by side")
    for add_group in _OPTION_GROUPS:  # in this order: --help lists the options as they come
        add_group(p)
    p.set_defaults(func=run)


def _add_model_options(p: argparse.ArgumentParser) -> None:
    """The model, where it runs and in which dtype; a second dtype for transformers' baseline."""
    add_model_options(p)
    p.add_argument(
        "--baseline-dtype",
        metavar="DTYPE",
        help="also run transformers' generate on the model in this dtype, as row hf@DTYPE "
        "(what a transformers user would pick, float32 on a CPU): the time to write the same "
        "number of tokens, not a lossless comparison (another dtype writes another text)",
    )


def _add_prompt_options(p: argparse.ArgumentParser) -> None:
    """What the methods continue: one prompt, or a suite's prompts."""
    p.add_argument("--prompt-file", help="prompt text (default: a 560-token prose chapter opening)")
    add_encoding(p)
    p.add_argument(
        "--suite",
        choices=("held-out",),
        help="run every prompt of a suite (prompts no drafter trained on, in six genres) and "
        "report each method's geometric-mean speed ratio to ar and hf",
    )
    p.add_argument(
        "--prompts", metavar="A,B", help="with --suite: only these prompts (by name, in order)"
    )


def _add_length_and_context_options(p: argparse.ArgumentParser) -> None:
    """How much each method writes, and what happens at the model's context limit."""
    p.add_argument("--max-new-tokens", type=positive_int, default=2048)
    p.add_argument("--penalty", type=non_negative_float, help="default: the preset's, else 1.2")
    p.add_argument("--window", type=positive_int, help="default: the preset's, else 1,024")
    p.add_argument(
        "--context-policy",
        choices=("stop", "slide"),
        default="stop",
        help="at the model's context limit: stop, or slide a window (sinks + recent text); "
        "hf cannot slide, so compare ar with tokenswift (the default methods then); slide "
        f"reports the run by segment of {SEGMENT:,} tokens as it goes (--segment)",
    )
    p.add_argument(
        "--segment",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="the marathon report: our methods write in turns of N tokens, and each segment of "
        "N tokens is printed as it ends: tokens/s, tokens per pass, the window's slides and "
        "their cost, RSS, Distinct-1..4, 4-gram repetition and chatter (the share of words in "
        f"lines that leave the story); default {SEGMENT:,} with --context-policy slide, else off "
        "(0: off)",
    )
    p.add_argument(
        "--context-limit",
        type=positive_int,
        default=None,
        metavar="N",
        help="our methods see at most N tokens (a window smaller than the model's context), so "
        "a short run slides as a long one would",
    )
    p.add_argument(
        "--slide-mode",
        choices=("shift", "reprefill"),
        default="shift",
        help="how the window slides: shift edits the KV cache (the oldest entries dropped, the "
        "kept keys moved to their new positions; no prefill), reprefill re-reads the window "
        "(a model whose rotary cannot be moved exactly re-reads it either way)",
    )


def _add_mode_options(p: argparse.ArgumentParser) -> None:
    """Greedy or sampled text, the app's writing mode and drafting strategy."""
    p.add_argument(
        "--sampling",
        choices=("greedy", "sample"),
        help="greedy (outputs must match hf; the default without --preset) or sample: "
        "TokenSwift's sampler, temperature 1.0 and min-p 0.1 (outputs are compared by "
        "Distinct-n instead)",
    )
    p.add_argument(
        "--preset",
        choices=sorted(MODES),
        help=f"the app's writing mode exactly ({modes_help()}); --sampling, --temperature, "
        "--top-p, --min-p, --penalty, --window and --dry change one of its values",
    )
    p.add_argument(
        "--uncoupled",
        action="store_true",
        help="sampling: drafters propose their most likely tokens instead of their draws under "
        "the target's noise (to measure what sharing the noise gains)",
    )
    p.add_argument(
        "--strategy",
        choices=list(STRATEGIES),
        default="balanced",
        help="the app's drafting strategy (default balanced, the app's default)",
    )


def _add_sampler_options(p: argparse.ArgumentParser) -> None:
    """The sampler's values, each in place of the mode's; seeds; DRY; the chatter fence."""
    p.add_argument("--seed", type=int, default=None, help="sampling seed (default 0)")
    p.add_argument("--temperature", type=positive_float, help="sampled text (default 1.0)")
    p.add_argument("--top-p", type=positive_float, help="sampled text (default 1.0)")
    p.add_argument(
        "--min-p",
        type=non_negative_float,
        help="sampled text (default 0.1, TokenSwift's sampler)",
    )
    p.add_argument(
        "--seeds",
        help="comma-separated sampling seeds: one run per seed, then Distinct-n per method "
        "compared over the seeds (mean, std, Welch and permutation p-values)",
    )
    p.add_argument(
        "--dry",
        type=non_negative_float,
        metavar="MULT",
        help="DRY repetition penalty multiplier (0 = off, the default without --preset), over "
        "the same window",
    )
    p.add_argument(
        "--ban-chatter",
        action="store_true",
        help="never write the tokens only chatter writes (headings' #, bold's **, code fences, "
        "chat turn markers; engine/decoding/chatter.py) nor letters in scripts the prompts do "
        "not use (engine/decoding/scripts.py), in every method alike: exactness holds",
    )
    p.add_argument("--dry-base", type=non_negative_float, default=1.75)
    p.add_argument("--dry-allowed-length", type=positive_int, default=2)


def _add_methods_option(p: argparse.ArgumentParser) -> None:
    """Which methods run side by side."""
    p.add_argument(
        "--methods",
        default=None,
        help=f"comma-separated (default {METHODS}; {SLIDE_METHODS} with a sliding window): hf, "
        "hf-lookup, ar, tokenswift-noheads (n-grams and suffix "
        "matches only), tokenswift (with the model's drafter when it has one), "
        "tokenswift-fastest (sampled text: tokenswift with the fastest sampler, drafts judged "
        "by rejection sampling; the same distribution as ar, another text per seed, compared "
        "by time per token: --methods ar,tokenswift,tokenswift-fastest compares the two "
        "samplers in one run), ar-legacy and "
        "tokenswift-legacy (the earlier passes, not batch-invariant: what exactness costs), "
        "tokenswift-fullcache (the drafter's separate draft pass over the whole context instead "
        "of the partial cache: beside tokenswift --draft-mode pass it shows what the partial "
        "cache saves as the context grows), llamacpp (llama.cpp's plain decoding on the same "
        "GGUF file: pip install -e '.[compare]')",
    )


def _add_drafter_options(p: argparse.ArgumentParser) -> None:
    """Tokenswift's drafter: which one, how it drafts and how wide its tree is."""
    p.add_argument(
        "--heads",
        metavar="DIR",
        help="drafter folder for tokenswift (default: the model's own, trained or shipped)",
    )
    p.add_argument("--no-heads", action="store_true", help="tokenswift without any drafter")
    p.add_argument(
        "--draft-mode",
        choices=("fused", "pass"),
        default="fused",
        help="fused (the app's): drafters read the verification pass's state; pass: an "
        "experiment, TokenSwift's separate draft pass on a partial KV cache of "
        f"{PARTIAL_BUDGET} tokens per head",
    )
    p.add_argument(
        "--head-tree",
        metavar="K1,K2,...",
        help="drafter candidates per node at each depth (default: the drafter kind's own)",
    )
    p.add_argument(
        "--head-grow",
        type=float,
        default=None,
        metavar="P",
        help="recurrent drafter: expand a node to the next depth only while the drafter's "
        "probability of its path is at least P (EAGLE-2's dynamic tree; 0 = always)",
    )
    p.add_argument(
        "--head-vocab",
        type=positive_int,
        default=None,
        help="score only the drafter's N most frequent draft-vocabulary ids",
    )


def _add_timing_options(p: argparse.ArgumentParser) -> None:
    """How the clock runs: repeats, turns, the tree's size."""
    p.add_argument(
        "--repeat", type=positive_int, default=1, help="runs per method; the fastest counts"
    )
    p.add_argument(
        "--turns",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="our methods write in turns of N tokens each, every method's clock running only in "
        "its own turns, so all of them see the same machine (its speed drifts by several "
        "percent within minutes); 0: one method after another",
    )
    p.add_argument("--max-nodes", type=int, default=None, help="draft nodes per step (tokenswift)")


def _add_report_options(p: argparse.ArgumentParser) -> None:
    """Where the report goes besides the table: JSON, a plot, the speed curve's points."""
    p.add_argument("--json", dest="json_out", help="write the full report here")
    p.add_argument(
        "--plot",
        metavar="FILE.png",
        help="draw speedup over hf and tokens/s against generated length, one line per method "
        "(the marathon: its segments' figures); needs matplotlib",
    )
    p.add_argument(
        "--checkpoints",
        help="comma-separated token counts for the speed curve "
        "(default: 1024, 2048, 4096, ... up to --max-new-tokens, and the end; powers of two from 16 "
        "if shorter)",
    )


def _add_history_options(p: argparse.ArgumentParser) -> None:
    """PROJECT, whose history seeds drafts (and its old spelling)."""
    p.add_argument(
        "project",
        nargs="?",
        metavar="PROJECT",
        help="seed drafts from this project's history: adds tokenswift+history "
        "(use a prompt that is not in the project)",
    )
    p.add_argument("--history", help=argparse.SUPPRESS)  # the old spelling of PROJECT


def _add_instead_options(p: argparse.ArgumentParser) -> None:
    """Measurements that run instead of the benchmark."""
    p.add_argument(
        "--verify-cost",
        action="store_true",
        help="instead: cost of one verification pass over k tree tokens: ours (batch-"
        "invariant), our earlier passes (legacy) and stock transformers",
    )
    p.add_argument(
        "--verify-curve",
        action="store_true",
        help="instead: the cost of the runs' pass over 1, 2, 4, ... 64 rows relative to one row, "
        "per dtype (auto: float32 and bfloat16) after 1,000, 4,000 and 8,000 cached tokens "
        "(those the model's context holds)",
    )


_OPTION_GROUPS = (
    _add_model_options,
    _add_prompt_options,
    _add_length_and_context_options,
    _add_mode_options,
    _add_sampler_options,
    _add_methods_option,
    _add_drafter_options,
    _add_timing_options,
    _add_report_options,
    _add_history_options,
    _add_instead_options,
)


def _tree(text: str) -> tuple[int, ...]:
    try:
        tree = tuple(int(k) for k in text.split(","))
    except ValueError as exc:
        raise UserError(f"--head-tree takes whole numbers like 4,3,2, not '{text}'") from exc
    if not tree or any(k < 1 for k in tree):
        raise UserError(f"--head-tree takes positive numbers like 4,3,2, not '{text}'")
    return tree


def _sampling(args) -> tuple[list[int], SamplingSettings]:
    """The seeds and the sampler every method runs: the app's mode (--preset) or, without one,
    greedy with penalty 1.2 over 1,024 (TokenSwift's sampler with --sampling sample), each
    value given on the command line in its place. Sets args.sampling, .penalty, .window and
    .dry to what runs (the report says them)."""
    base = MODES[args.preset] if args.preset else SamplingSettings()
    chosen = (
        f"--sampling {args.sampling}" if args.sampling
        else f"--preset {args.preset}" if args.preset
        else "bench's default (--sampling greedy)"
    )  # fmt: skip
    greedy = base.greedy if args.sampling is None else args.sampling == "greedy"
    args.sampling = "greedy" if greedy else "sample"
    given = sampler_overrides(args, greedy, chosen)
    if not greedy and not args.preset:
        given.setdefault("min_p", TOKENSWIFT_MIN_P)
    seeds = _seeds(args)
    sampling = replace(base, greedy=greedy, seed=seeds[0] if seeds else None,
                       dry_base=args.dry_base, dry_allowed_length=args.dry_allowed_length,
                       **given)  # fmt: skip
    args.penalty, args.window, args.dry = sampling.penalty, sampling.window, sampling.dry_multiplier
    return seeds, sampling


def _drafting(args):
    """The app's strategy with the drafting options given (--max-nodes, --head-tree, ...)."""
    options = {}
    if args.max_nodes is not None:
        options["max_nodes"] = args.max_nodes
    if args.head_tree:
        options["head_tree"] = _tree(args.head_tree)
    if args.head_vocab:
        options["head_vocab"] = args.head_vocab
    if args.head_grow is not None:
        options["head_grow"] = args.head_grow
    if args.uncoupled:
        options["couple"] = False
    return replace(STRATEGIES[args.strategy], **options)


def _default_or_file(args) -> str:
    if args.prompt_file:
        return read_text_file(args.prompt_file, args.encoding)

    return (paths.resources_dir() / "prompts" / "harbour.txt").read_text(encoding="utf-8")


def _encode(tokenizer, text: str, name: str | None) -> list[int]:
    ids = encode(tokenizer, text)
    if not ids:
        raise UserError(f"The prompt {name or ''} is empty".replace("  ", " "))
    return ids


@dataclass
class _Bench:
    """What every prompt's run shares: the options read, the model and its drafters loaded."""

    entry: Any  # the registry's entry of the model
    methods: list[str]
    seeds: list[int]
    sampling: SamplingSettings
    drafting: Any  # the app's strategy with the drafting options given
    loaded: Any = None  # the model loaded (modelstore/loader.py)
    prompts: list = field(default_factory=list)  # (name, token ids) of each prompt
    baseline: tuple | None = None  # (dtype, model) of --baseline-dtype
    drafter: Any = None
    heads_status: str = "off"
    extra_sources: Any = None  # a factory of the project's history sources
    llama: Any = None
    meta: dict = field(default_factory=dict)


def run(args: argparse.Namespace) -> int:
    bench = _parse(args)
    if args.verify_cost:
        return _verify_cost(bench.entry, args)
    if args.verify_curve:
        return _verify_curve(bench.entry, args)
    _validate(args, bench.methods)
    prompts = _prompts(args)
    if args.plot:  # said before the run, not after it: matplotlib is the bench extra's
        from swiftwriter.bench import curves  # lazy: pulls in transformers

        curves.pyplot()
    _load(args, bench, prompts)
    results, differing = {}, []
    for index, (name, prompt) in enumerate(bench.prompts):
        results[name] = _run_prompt(args, bench, index, name, prompt, differing)
    if args.suite:
        return _suite_end(args, bench.meta, results) or _verdict(differing)
    _write_report(args, bench, *results[None])
    return _verdict(differing)


def _parse(args) -> _Bench:
    """The options read into what runs: bad ones fail before torch and the model load."""
    from swiftwriter.modelstore.placement import check_device  # lazy: pulls in numpy

    check_device(args.device)
    seeds, sampling = _sampling(args)
    drafting = _drafting(args)

    args.history = renamed(args.project, args.history, "bench --history PROJECT", "bench PROJECT")
    entry = registry.resolve(args.model)
    return _Bench(entry, _methods(args), seeds, sampling, drafting)


def _methods(args) -> list[str]:
    """The methods asked for (the defaults fit the context policy); an unknown one is refused."""
    from swiftwriter.bench import (  # lazy: pulls in torch, transformers, safetensors, numpy
        methods as bench_methods,
    )

    if args.methods is None:
        args.methods = SLIDE_METHODS if args.context_policy == "slide" else METHODS
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    known = (*bench_methods.OTHER_ENGINES, *bench_methods.METHODS)
    unknown = set(methods) - set(known)
    if unknown:
        raise UserError(f"Unknown methods {sorted(unknown)}; known: {', '.join(known)}")
    return methods


def _validate(args, methods: list[str]) -> None:
    """Refuses the methods and options that cannot run together; sets the default --segment."""
    if "tokenswift-fullcache" in methods and args.no_heads:
        raise UserError("tokenswift-fullcache runs the drafter's draft pass: drop --no-heads")
    if args.context_policy == "slide" and any(m.startswith("hf") for m in methods):
        raise UserError(
            "hf has no sliding context window: with --context-policy slide compare ar and "
            "tokenswift (for example --methods ar,tokenswift-noheads)"
        )
    if args.context_limit and any(m.startswith("hf") for m in methods):
        raise UserError("--context-limit applies to our methods only: drop hf and hf-lookup")
    if args.segment is None:
        args.segment = SEGMENT if args.context_policy == "slide" else 0


def _load(args, bench: _Bench, prompts: list[tuple[str | None, str]]) -> None:
    """The model, the prompts' tokens, the baseline, the drafters and the report's meta."""
    from swiftwriter.engine.passes import (  # lazy: pulls in torch, transformers, numpy
        precision_line,
    )
    from swiftwriter.modelstore import loader  # lazy: pulls in numpy

    loaded = loader.load(bench.entry, device=args.device, dtype=args.dtype, with_drafter=False)
    bench.loaded = loaded
    # ar and tokenswift ask for invariant passes (bench/methods.py), whatever the model's default
    print(precision_line(loaded.precision(), loaded.model, invariant=True), file=sys.stderr)
    prompts_text = "\n".join(text for _, text in prompts)  # the scripts the run's fence keeps
    bench.prompts = [(name, _encode(loaded.tokenizer, text, name)) for name, text in prompts]
    bench.baseline = _baseline(args, bench.entry)
    _load_drafter(args, bench)
    bench.extra_sources = _history(args, loaded.tokenizer, bench.methods)
    if args.ban_chatter:
        bench.sampling = replace(
            bench.sampling, banned_tokens=story_only_bans(loaded, prompts_text)
        )
    bench.meta = _meta(args, bench)
    bench.llama = _llamacpp(
        bench.entry, bench.methods, bench.prompts, args.max_new_tokens, bench.meta
    )
    bench.meta["segment"] = args.segment or None
    bench.meta["context_limit"] = args.context_limit
    bench.meta["slide_mode"] = args.slide_mode if args.context_policy == "slide" else None


def _baseline(args, entry) -> tuple | None:
    """(dtype, model) for transformers' generate in --baseline-dtype; None without it."""
    if not args.baseline_dtype:
        return None
    if args.context_policy == "slide":
        raise UserError("hf has no sliding context window: drop --baseline-dtype")
    from swiftwriter.modelstore import loader  # lazy: pulls in numpy

    other = loader.load(entry, device=args.device, dtype=args.baseline_dtype, with_drafter=False)
    return (other.dtype, other.model)


def _load_drafter(args, bench: _Bench) -> None:
    """The model's drafter (or --heads), unless --no-heads; one line says which drafts run."""
    from swiftwriter.modelstore import loader  # lazy: pulls in numpy

    if not args.no_heads:
        bench.drafter, bench.heads_status = loader.load_drafter(
            bench.loaded, Path(args.heads).expanduser() if args.heads else None
        )
    without = drafting_without(bench.heads_status, history=bool(args.history))
    print(without or f"drafter: {bench.heads_status}", file=sys.stderr)
    if bench.drafter is None and "tokenswift-fullcache" in bench.methods:
        raise UserError(f"tokenswift-fullcache needs the model's drafter ({bench.heads_status})")


def _history(args, tokenizer, methods: list[str]):
    """With PROJECT: its history's sources, and method tokenswift+history added to `methods`."""
    if not args.history:
        if "tokenswift+history" in methods:
            raise UserError("tokenswift+history needs a PROJECT (`bench PROJECT`)")
        return None
    extra_sources, history_tokens = _history_sources(args.history, tokenizer)
    if "tokenswift+history" not in methods:
        methods.append("tokenswift+history")
    print(f"history: {history_tokens} tokens from {args.history}", file=sys.stderr)
    return extra_sources


def _meta(args, bench: _Bench) -> dict:
    """The report's account of the run: the model, drafter, sampler and options."""
    sampling, drafting, loaded = bench.sampling, bench.drafting, bench.loaded
    return {
        "model": bench.entry.id,
        "drafter": bench.heads_status,
        "drafter_card": bench.drafter.card if bench.drafter is not None else None,
        "device": loaded.device,
        "dtype": loaded.dtype,
        "dtype_why": loaded.dtype_why,
        "baseline_dtype": bench.baseline[0] if bench.baseline else None,
        "max_new_tokens": args.max_new_tokens,
        "penalty": args.penalty,
        "window": args.window,
        "context_policy": args.context_policy,
        "draft_mode": args.draft_mode,
        "head_tree": list(drafting.head_tree),
        "head_grow": drafting.head_grow,
        "sampling": args.sampling,
        "preset": args.preset,
        "strategy": args.strategy,
        "coupled": drafting.couple,
        "min_p": sampling.min_p,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "seeds": bench.seeds,
        "banned_tokens": len(sampling.banned_tokens),
        "dry": {
            "multiplier": args.dry,
            "base": args.dry_base,
            "allowed_length": args.dry_allowed_length,
        },
    }


def _run_prompt(args, bench: _Bench, index: int, name, prompt: list[int], differing: list):
    """Every method (and seed) on one prompt, each seed's tables printed; the runs that wrote
    another text than ar go into `differing`. Returns (prompt tokens, runs, comparison)."""
    from swiftwriter.bench import (  # lazy: pulls in torch, transformers, safetensors, numpy
        methods as bench_methods,
    )

    if args.suite:
        print(f"== {name}", flush=True)
    print(_headline(args, bench, prompt), file=sys.stderr)
    segments = _segments(args, bench.loaded.tokenizer)
    runs = bench_methods.run_seeds(
        bench.loaded.model,
        prompt,
        args.max_new_tokens,
        bench.sampling,
        bench.methods,
        bench.seeds or [None],
        args.repeat,
        bench.drafting,
        extra_sources=bench.extra_sources,
        drafter=bench.drafter,
        checkpoints=_checkpoints(args.checkpoints),
        context=ContextSettings(policy=args.context_policy, slide_mode=args.slide_mode),
        baseline=bench.baseline,
        warmup=index == 0,
        partial_budget=PARTIAL_BUDGET if args.draft_mode == "pass" else None,
        turns=args.turns,
        segments=segments,
        context_limit=args.context_limit,
        llama=bench.llama,
    )
    for seed, seed_report in runs.items():
        if len(runs) > 1:
            print(f"seed {seed}")
        _print_seed_report(seed_report, segments)
        differing.extend(_not_lossless(seed_report, name or args.prompt_file, seed))
    comparison = bench_methods.compare_seeds(runs) if len(runs) > 1 else None
    if comparison:
        print(bench_methods.format_comparison(comparison))
    return len(prompt), runs, comparison


def _headline(args, bench: _Bench, prompt: list[int]) -> str:
    """One line on what runs: model, device, dtype, lengths and the sampler."""
    loaded, sampling, seeds = bench.loaded, bench.sampling, bench.seeds
    return (
        f"model {bench.entry.id} · {loaded.device} · {loaded.dtype} · prompt {len(prompt)} tokens · "
        f"{args.max_new_tokens} new · penalty {args.penalty}/{args.window} · {args.sampling}"
        + (f" · sliding context ({args.slide_mode})" if args.context_policy == "slide" else "")
        + (f" ({args.preset})" if args.preset else "")
        + (
            f" (temperature {sampling.temperature}, top-p {sampling.top_p}, min-p "
            f"{sampling.min_p}, seeds {', '.join(map(str, seeds))})"
            if seeds
            else ""
        )
        + (f" · DRY {args.dry}/{args.dry_base}/{args.dry_allowed_length}" if args.dry else "")
        + (f" · window {args.context_limit}" if args.context_limit else "")
        + (f" · {len(sampling.banned_tokens)} tokens banned" if args.ban_chatter else "")
    )


def _print_seed_report(seed_report: dict, segments) -> None:
    """One seed's tables: speed, the long run, the marathon's summaries, the drafter's hits."""
    from swiftwriter.bench import (  # lazy: pulls in torch, transformers, safetensors, numpy
        methods as bench_methods,
    )

    print(bench_methods.format_table(seed_report))
    print(bench_methods.format_long_run(seed_report))
    if segments is not None:
        from swiftwriter.bench import marathon  # lazy: pulls in transformers

        for method, row in seed_report.items():
            if "marathon" in row:
                print(marathon.format_summary(method, row["marathon"]))
    hits = seed_report.get("ar", {}).get("drafter_accuracy")
    if hits:
        print("drafter on ar's text: " + format_hits(hits))


def _write_report(args, bench: _Bench, prompt_tokens: int, runs: dict, comparison) -> None:
    """One prompt's report written with --json and drawn with --plot."""
    report = next(iter(runs.values()))
    if args.json_out:
        out = {"meta": {**bench.meta, "prompt_tokens": prompt_tokens}, "methods": report}
        if comparison:
            out["by_seed"] = {str(seed): rep for seed, rep in runs.items()}
            out["comparison"] = comparison
        Path(args.json_out).write_text(json.dumps(out, indent=2))
    if args.plot:
        from swiftwriter.bench import curves, marathon  # lazy: pulls in transformers

        title = f"{bench.entry.id} · {bench.loaded.dtype} · prompt {prompt_tokens} tokens"
        if args.segment:
            rows = {method: row["segments"] for method, row in report.items() if "segments" in row}
            marathon.plot(rows, args.plot, f"{title} · {args.sampling} · by {args.segment} tokens")
        else:
            curves.plot(report, args.plot, title)
        print(f"plot: {args.plot}", file=sys.stderr)


def _segments(args, tokenizer):
    """The marathon's segments (bench/marathon.py), each printed as it ends; None when off."""
    if not args.segment:
        return None
    from swiftwriter.bench import marathon  # lazy: pulls in transformers

    print(marathon.HEADER, flush=True)
    return marathon.Segments(
        args.segment,
        decode=lambda ids: tokenizer.decode(ids),
        emit=lambda method, row: print(marathon.format_row(method, row), flush=True),
    )


def _not_lossless(report: dict, prompt: str | None, seed) -> list[str]:
    """One line per speculative method of ours whose text is not ar's (for the same prompt and
    seed): they promise exactly plain decoding's text (the -legacy passes, not batch-invariant,
    transformers' methods and the "fastest" sampler, which keeps only the distribution, do
    not)."""
    run = f"prompt {prompt or 'default'}" + ("" if seed is None else f", seed {seed}")
    return [
        f"{method} wrote another text than ar ({run})"
        for method, row in report.items()
        if method.startswith("tokenswift") and not method.endswith(("-legacy", "-fastest"))
        if row.get("identical_to_ar") is False
    ]


def _verdict(differing: list[str]) -> int:
    """1 when speculation changed the text anywhere (each run named on stderr), else 0."""
    for line in differing:
        print(f"swiftwriter: {line}", file=sys.stderr)
    return 1 if differing else 0


def _prompts(args) -> list[tuple[str | None, str]]:
    """(name, text) of each prompt to run: the suite's (or the chosen ones), else one prompt
    (named None) from --prompt-file or the default."""
    if not args.suite:
        if args.prompts:
            raise UserError("--prompts chooses from a suite: add --suite held-out")
        return [(None, _default_or_file(args))]
    if args.prompt_file or args.plot or args.history:
        raise UserError("--suite runs the suite's own prompts: drop --prompt-file, --plot, PROJECT")

    return [(p.name, p.text) for p in suite.select(suite.load_suite(args.suite), args.prompts)]


def _suite_end(args, meta: dict, results: dict) -> int:
    """The suite's summary over every prompt (and seed), printed and written with --json."""
    reports = {}
    for name, (_, runs, _) in results.items():
        for seed, report in runs.items():
            reports[name if len(runs) == 1 else f"{name}/seed {seed}"] = report
    summary = suite.means_by_method(reports)
    print(f"suite {args.suite}: {len(results)} prompts, {len(reports)} runs per method")
    print(suite.format_summary(summary))
    if args.json_out:
        out = {
            "meta": {**meta, "suite": args.suite},
            "summary": summary,
            "prompts": {
                name: {
                    "prompt_tokens": tokens,
                    "by_seed": {str(seed): rep for seed, rep in runs.items()},
                    "comparison": comparison,
                }
                for name, (tokens, runs, comparison) in results.items()
            },
        }
        Path(args.json_out).write_text(json.dumps(out, indent=2))
    return 0


def _checkpoints(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        points = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise UserError(f"--checkpoints takes comma-separated token counts, not '{text}'") from None
    if not points or points[0] < 1:
        raise UserError("--checkpoints must be positive token counts")
    return points


def _seeds(args) -> list[int]:
    """Sampling seeds from --seeds or --seed (0 when sampling without either); [] for greedy."""
    if args.sampling == "greedy":
        if args.seeds or args.seed is not None:
            raise UserError("--seed and --seeds apply to --sampling sample only")
        return []
    if not args.seeds:
        return [args.seed if args.seed is not None else 0]
    try:
        seeds = [int(part) for part in args.seeds.split(",") if part.strip()]
    except ValueError as exc:
        raise UserError(
            f"--seeds takes whole numbers separated by commas, not '{args.seeds}'"
        ) from exc
    if not seeds or len(set(seeds)) != len(seeds):
        raise UserError(f"--seeds needs distinct seeds, not '{args.seeds}'")
    return seeds


def _history_sources(project_path: str, tokenizer):
    """A factory of fresh HistorySources over the project's history (read-only: nothing saved)."""
    from swiftwriter.engine.decoding.history_source import (  # lazy: pulls in torch, numpy
        HistorySource,
    )
    from swiftwriter.writing.history import ProjectHistory  # lazy: pulls in torch, numpy

    with Project.open(Path(project_path), readonly=True) as project:
        index = ProjectHistory.of(project, tokenizer).refresh()
    return (lambda: [HistorySource(index)]), len(index)


def _verify_cost(entry, args) -> int:
    from swiftwriter.bench import verifycost  # lazy: pulls in torch, transformers, numpy
    from swiftwriter.modelstore import loader  # lazy: pulls in numpy

    dtypes = ["float32", "bfloat16"] if args.dtype == "auto" else [args.dtype]
    result = {}
    for dtype in dtypes:
        ours_model = loader.load(entry, device=args.device, dtype=dtype).model
        stock_model = loader.load(entry, device=args.device, dtype=dtype, cpu_layout=False).model
        for context in (512, 4000):
            rows = {
                "ours": verifycost.our_costs(ours_model, context),
                "legacy": verifycost.our_costs(ours_model, context, invariant=False),
                "stock": verifycost.stock_costs(stock_model, context),
            }
            result[f"{dtype}/{context}"] = {
                f"{name}_ms": {k: round(v * 1e3, 1) for k, v in costs.items()}
                for name, costs in rows.items()
            }
            for i, (name, costs) in enumerate(rows.items()):
                rel = verifycost.relative(costs)
                head = f"{dtype:9} ctx {context:5}" if i == 0 else " " * 19
                print(
                    f"{head}  {name:6}: "
                    + "  ".join(f"k={k} {costs[k] * 1e3:5.0f}ms x{rel[k]:.2f}" for k in costs),
                    flush=True,
                )
        del ours_model, stock_model
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2))
    return 0


def _llamacpp(entry, methods: list[str], prompts, max_new_tokens: int, meta: dict):
    """The model's GGUF file loaded in llama.cpp when `llamacpp` is asked for, on our thread
    count; where it cannot run, the method is dropped and one line says why."""
    if "llamacpp" not in methods:
        return None
    import torch  # lazy: torch

    from swiftwriter.modelstore import provision  # lazy: pulls in numpy

    why = llamacpp.unavailable()
    if not why and entry.source not in provision.GGUF_SOURCES:
        why = f"{entry.name} is not a GGUF model: llama.cpp needs its file"
    if why:
        methods.remove("llamacpp")
        print(f"llamacpp: {why}", file=sys.stderr)
        meta["llamacpp"] = why
        return None
    context = max(len(prompt) for _, prompt in prompts) + max_new_tokens + 16
    llama = llamacpp.LlamaCpp(provision.locate_gguf(entry), context, torch.get_num_threads())
    meta["llamacpp"] = llama.note()
    print(f"llamacpp: {llama.note()}", file=sys.stderr)
    return llama


def _verify_curve(entry, args) -> int:
    from swiftwriter.bench import verifycost  # lazy: pulls in torch, transformers, numpy
    from swiftwriter.modelstore import loader  # lazy: pulls in numpy

    dtypes = ["float32", "bfloat16"] if args.dtype == "auto" else [args.dtype]
    if args.dtype == "auto" and not loader.can_store(entry):  # a GGUF's weights as stored too
        dtypes.append(loader.STORED)
    curves: dict[str, dict[int, dict[int, float]]] = {}
    for dtype in dtypes:
        model = loader.load(entry, device=args.device, dtype=dtype, with_drafter=False).model
        contexts = verifycost.curve_contexts(model)
        curves[dtype] = {context: verifycost.curve(model, context) for context in contexts}
        del model
    print(verifycost.format_curve(curves))
    if args.json_out:
        out = {
            dtype: {
                str(context): {
                    "ms": {str(k): round(v * 1e3, 2) for k, v in costs.items()},
                    "relative": {
                        str(k): round(v, 3) for k, v in verifycost.relative(costs).items()
                    },
                }
                for context, costs in by_context.items()
            }
            for dtype, by_context in curves.items()
        }
        Path(args.json_out).write_text(json.dumps({"model": entry.id, "curves": out}, indent=2))
    return 0

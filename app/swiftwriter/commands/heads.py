"""`swiftwriter heads`: train a drafter for a model (base frozen, resumable), or show one.

Training text comes from files (`--text`) and/or the model itself (`--self-distill N`: the model
writes N tokens of its own prose first, the best target for drafts of its own output). Text,
features and checkpoints live in the output folder, so an interrupted run (Ctrl+C, --hours)
picks up where it was when the same command runs again. Each stage says how long it will take
once its first units are timed; the model and the drafter use the GPU where there is one."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from swiftwriter.commands.common import add_encoding, positive_int, read_text_file
from swiftwriter.engine.decoding.settings import MODES
from swiftwriter.engine.decoding.textgen import encode
from swiftwriter.errors import UserError
from swiftwriter.training.eta import StageEstimate, duration

clock = time.monotonic  # the --hours budget's clock (tests replace it)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("heads", help="train or show drafting heads")
    hsub = parser.add_subparsers(dest="heads_cmd")
    t = hsub.add_parser("train", help="train a drafter with the model frozen (resumable)")
    for add_group in _TRAIN_OPTION_GROUPS:  # in this order: --help lists them as they come
        add_group(t)
    s = hsub.add_parser("show", help="print a drafter's card")
    s.add_argument("folder")
    parser.set_defaults(func=run)


def _add_text_options(t: argparse.ArgumentParser) -> None:
    """The model, where the drafter goes, and the text it trains on (files, the model's own)."""
    t.add_argument("--model", help="registry id or model folder (default: the default model)")
    t.add_argument("--out", required=True, help="output folder (weights, card, checkpoints)")
    t.add_argument("--text", action="append", default=[], help="UTF-8 training text (repeatable)")
    add_encoding(t)
    t.add_argument(
        "--self-distill",
        type=int,
        default=0,
        metavar="N",
        help="first let the model write N tokens of its own text to train on",
    )
    t.add_argument(
        "--max-rows",
        type=positive_int,
        default=None,
        metavar="N",
        help="train on N rows of --text spread evenly over it (a smaller, varied slice)",
    )
    t.add_argument(
        "--distill-modes",
        default="precise,creative",
        metavar="MODES",
        help="the modes the model writes in, in turn (app modes, or tokenswift)",
    )


def _add_objective_options(t: argparse.ArgumentParser) -> None:
    """What the drafter learns, and from which drafter it starts."""
    t.add_argument(
        "--objective",
        choices=["greedy", "coupled", "both", "tv"],
        default="greedy",
        help="what the drafter learns: the penalised top choice's distribution (greedy), the "
        "distribution --preset samples from, for drafts under its shared noise (coupled), both, "
        "or that distribution in total variation, for the fastest sampler's walk (tv)",
    )
    t.add_argument(
        "--preset",
        choices=sorted(MODES),
        default="creative",
        help="the sampled app mode that coupled and tv learn",
    )
    t.add_argument(
        "--init", default="", metavar="DIR", help="start from this drafter (fine-tuning)"
    )


def _add_size_options(t: argparse.ArgumentParser) -> None:
    """The drafter's kind and size, and how long and in what batches it trains."""
    t.add_argument("--kind", choices=["recurrent", "linear"], default="recurrent")
    t.add_argument("--steps", type=positive_int, default=1500)
    t.add_argument("--batch", type=positive_int, default=512, help="positions per step")
    t.add_argument("--lr", type=float, default=0.0, help="learning rate (0: the kind's default)")
    t.add_argument("--depth", type=positive_int, default=3, help="heads / unrolled draft steps")
    t.add_argument("--draft-vocab", type=positive_int, default=8192)
    t.add_argument("--row-length", type=positive_int, default=768)
    t.add_argument(
        "--write-batch", type=positive_int, default=16, help="texts the model writes at once"
    )
    t.add_argument(
        "--hours",
        type=float,
        default=0.0,
        help="stop after this many hours, keeping the progress (run again to resume)",
    )


def _add_penalty_and_device_options(t: argparse.ArgumentParser) -> None:
    """The penalty the drafter is trained against; where and in which dtype the model runs."""
    t.add_argument(
        "--penalty",
        type=float,
        default=1.2,
        help="the contextual penalty the drafter is trained against (1.0: none)",
    )
    t.add_argument("--window", type=positive_int, default=1024, help="the penalty's window")
    t.add_argument("--device", default="auto", help="auto: the GPU where there is one")
    t.add_argument(
        "--dtype",
        default="auto",
        help="the model's dtype: auto (float32 on the CPU, where training wants exact "
        "features; on a GPU what auto picks everywhere, measured), float32, bfloat16 or float16",
    )


_TRAIN_OPTION_GROUPS = (
    _add_text_options,
    _add_objective_options,
    _add_size_options,
    _add_penalty_and_device_options,
)


UNITS = {"writing": "tok", "features": "row", "training": "step"}
NOUNS = {"writing": "tokens", "features": "rows", "training": "steps"}


class StageProgress:
    """A tqdm bar per stage on stderr, and once its first units are timed, one line saying
    how long the stage will take (training/eta.py)."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.bars: dict[str, object] = {}
        self.estimates: dict[str, object] = {}

    def __call__(self, stage: str, done: int, total: int, loss: float | None = None) -> None:
        bar = self.bars.get(stage)
        if bar is None:
            from tqdm import tqdm  # lazy: tqdm, only while training

            bar = self.bars[stage] = tqdm(
                total=total, desc=stage, unit=UNITS.get(stage, "it"), file=sys.stderr,
                initial=done, dynamic_ncols=True, mininterval=0.5, leave=True,
            )  # fmt: skip
            self.estimates[stage] = StageEstimate(clock=self.clock)
        if total != bar.total:
            bar.total = total
        bar.update(max(0, done - bar.n))
        if loss is not None:
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
        estimate = self.estimates[stage]
        left = estimate.update(done, total)
        if left is not None:
            noun = NOUNS.get(stage, "units")
            bar.write(
                f"{stage}: {duration(left)} left for {total - done:,} of {total:,} {noun} "
                f"(measured over {estimate.measured})",
                file=sys.stderr,
            )
        if done >= total:
            bar.close()

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def drafting_without(status: str, history: bool = False) -> str | None:
    """The line that says what drafts when a model has no usable drafter (none trained for it,
    or one that does not fit): tokenswift still drafts from the n-gram and suffix sources, and
    the project's history where it has one. None when a drafter is present or was not looked for."""
    if not status.startswith(("missing", "mismatched")):
        return None
    sources = "n-gram, suffix and history" if history else "n-gram and suffix"
    return (
        f"drafter: {status}; tokenswift drafts from the {sources} sources "
        "(swiftwriter heads train makes one)"
    )


def text_rows(tokenizer, paths: list[str], length: int, encoding: str | None = None):
    """Training files (in `encoding` where one is named) cut into rows of `length` token ids."""
    import torch  # lazy: torch

    ids: list[int] = []
    for p in paths:
        ids.extend(encode(tokenizer, read_text_file(p, encoding)))
    n = len(ids) // length
    if n == 0:
        raise UserError(f"The training text holds {len(ids)} tokens: give at least {length}")
    return torch.tensor(ids[: n * length], dtype=torch.int32).view(n, length)


def run(args: argparse.Namespace) -> int:
    if args.heads_cmd == "show":
        from swiftwriter.engine.decoding import (  # lazy: pulls in torch, safetensors
            drafter_files as files,
        )

        bundle = files.load(Path(args.folder))
        print(json.dumps(bundle.card, indent=2, sort_keys=True))
        return 0
    if args.heads_cmd != "train":
        raise UserError("Say what to do: swiftwriter heads train|show")
    return train(args)


def train(args: argparse.Namespace) -> int:
    from swiftwriter.modelstore import loader, registry  # lazy: pulls in numpy

    _check_train_options(args)
    out = Path(args.out).expanduser()
    entry = registry.resolve(args.model)
    device = loader.pick_device(args.device)
    dtype = "float32" if args.dtype == "auto" and device == "cpu" else args.dtype
    loaded = loader.load(entry, device=device, dtype=dtype, with_drafter=False)
    print(f"training on {loaded.device} ({loaded.dtype})", file=sys.stderr)
    rows = _given_rows(args, loaded.tokenizer)
    progress = StageProgress()
    try:
        bundle = _train_drafter(args, loaded, entry, out, rows, progress)
    except KeyboardInterrupt:
        progress.close()
        print(
            f"interrupted; the progress is kept in {out}: run the same command again to go on",
            file=sys.stderr,
        )
        return 130
    progress.close()
    if bundle is None:
        print(
            f"stopped after {args.hours:g} hours; the progress is kept in {out}: run the same "
            "command again to go on",
            file=sys.stderr,
        )
        return 3
    val = bundle.card["validation"]
    coupled = f" coupled {val['coupled']}" if "coupled" in val else ""
    print(
        f"saved {bundle.kind} drafter to {out}: held-out top-1 {val['top1']} "
        f"top-3 {val['top3']}{coupled}"
    )
    return 0


def _check_train_options(args: argparse.Namespace) -> None:
    """Refuses a budget or penalty out of range, and a run with nothing to train on."""
    if args.hours < 0 or not 1.0 <= args.penalty <= 3.0:
        raise UserError("--hours must be 0 or more, --penalty between 1.0 and 3.0")
    if not args.text and args.self_distill <= 0:
        raise UserError("Give training text (--text FILE) or --self-distill N (or both)")


def _given_rows(args: argparse.Namespace, tokenizer):
    """The --text files' rows (at most --max-rows, spread evenly over them); None without."""
    import torch  # lazy: torch

    if not args.text:
        return None
    rows = text_rows(tokenizer, args.text, args.row_length, args.encoding)
    if args.max_rows and args.max_rows < len(rows):
        rows = rows[torch.linspace(0, len(rows) - 1, args.max_rows).long()].contiguous()
    return rows


def _train_drafter(args: argparse.Namespace, loaded, entry, out: Path, rows, progress):
    """The training pipeline on the options given; None when --hours ran out first."""
    from swiftwriter.training.pipeline import (  # lazy: pulls in torch, transformers, safetensors, numpy
        train_drafter,
    )
    from swiftwriter.training.train import (  # lazy: pulls in torch, transformers, safetensors, numpy
        TrainSettings,
    )

    settings = TrainSettings(
        kind=args.kind,
        steps=args.steps,
        batch=args.batch,
        lr=args.lr,
        depth=args.depth,
        draft_vocab=args.draft_vocab,
        penalty=args.penalty,
        window=args.window,
        objective=args.objective,
        preset=args.preset,
        init=str(Path(args.init).expanduser()) if args.init else "",
    )
    modes = tuple(m.strip() for m in args.distill_modes.split(",") if m.strip())
    deadline = clock() + args.hours * 3600 if args.hours > 0 else None
    return train_drafter(
        loaded.model,
        loaded.tokenizer,
        entry.id,
        out,
        settings,
        given_rows=rows,
        self_distill=args.self_distill,
        row_length=args.row_length,
        write_batch=args.write_batch,
        distill_modes=modes,
        on_progress=progress,
        should_stop=(lambda: clock() >= deadline) if deadline else None,
    )

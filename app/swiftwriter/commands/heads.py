"""`swiftwriter heads`: train a drafter for a model (base frozen, resumable), or show one.

Training text comes from files (`--text`) and/or the model itself (`--self-distill N`: the model
writes N tokens of its own prose first, the best target for drafts of its own output). Text,
features and checkpoints live in the output folder, so an interrupted run picks up where it was."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from swiftwriter.commands.common import positive_int, read_text_file
from swiftwriter.errors import UserError

clock = time.monotonic  # the --hours budget's clock (tests replace it)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("heads", help="train or show drafting heads")
    hsub = parser.add_subparsers(dest="heads_cmd")
    t = hsub.add_parser("train", help="train a drafter with the model frozen (resumable)")
    t.add_argument("--model", help="registry id or model folder (default: the default model)")
    t.add_argument("--out", required=True, help="output folder (weights, card, checkpoints)")
    t.add_argument("--text", action="append", default=[], help="UTF-8 training text (repeatable)")
    t.add_argument(
        "--self-distill",
        type=int,
        default=0,
        metavar="N",
        help="first let the model write N tokens of its own text to train on",
    )
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
    t.add_argument(
        "--penalty",
        type=float,
        default=1.2,
        help="the contextual penalty the drafter is trained against (1.0: none)",
    )
    t.add_argument("--window", type=positive_int, default=1024, help="the penalty's window")
    t.add_argument("--device", default="auto")
    t.add_argument("--dtype", default="float32")
    s = hsub.add_parser("show", help="print a drafter's card")
    s.add_argument("folder")
    parser.set_defaults(func=run)


class ProgressBar:
    """One stderr line: bar, step, loss, speed, ETA."""

    def __init__(self, label: str):
        self.label, self.t0, self.last = label, time.time(), 0.0

    def __call__(self, done: int, total: int, loss: float | None = None) -> None:
        now = time.time()
        if now - self.last < 0.5 and done < total:
            return
        self.last = now
        frac = done / max(1, total)
        rate = done / max(1e-9, now - self.t0)
        eta = (total - done) / rate if rate > 0 else 0
        bar = "#" * int(frac * 24)
        loss_text = f" loss {loss:.3f}" if loss is not None else ""
        print(
            f"\r{self.label} [{bar:24}] {done}/{total}{loss_text} eta {eta:.0f}s",
            end="" if done < total else "\n",
            file=sys.stderr,
            flush=True,
        )


def text_rows(tokenizer, paths: list[str], length: int):
    """Training files cut into rows of `length` token ids."""
    import torch

    from swiftwriter.engine.textgen import encode

    ids: list[int] = []
    for p in paths:
        ids.extend(encode(tokenizer, read_text_file(p)))
    n = len(ids) // length
    if n == 0:
        raise UserError(f"The training text holds {len(ids)} tokens: give at least {length}")
    return torch.tensor(ids[: n * length], dtype=torch.int32).view(n, length)


def run(args: argparse.Namespace) -> int:
    if args.heads_cmd == "show":
        from swiftwriter.engine.heads import files

        bundle = files.load(Path(args.folder))
        print(json.dumps(bundle.card, indent=2, sort_keys=True))
        return 0
    if args.heads_cmd != "train":
        raise UserError("Say what to do: swiftwriter heads train|show")
    return train(args)


def train(args: argparse.Namespace) -> int:
    from swiftwriter.engine.heads.pipeline import train_drafter
    from swiftwriter.engine.heads.train import TrainSettings
    from swiftwriter.modelstore import loader, registry

    if args.hours < 0 or not 1.0 <= args.penalty <= 3.0:
        raise UserError("--hours must be 0 or more, --penalty between 1.0 and 3.0")
    if not args.text and args.self_distill <= 0:
        raise UserError("Give training text (--text FILE) or --self-distill N (or both)")
    out = Path(args.out).expanduser()
    entry = registry.resolve(args.model)
    loaded = loader.load(entry, device=args.device, dtype=args.dtype, with_drafter=False)
    rows = text_rows(loaded.tokenizer, args.text, args.row_length) if args.text else None
    settings = TrainSettings(
        kind=args.kind,
        steps=args.steps,
        batch=args.batch,
        lr=args.lr,
        depth=args.depth,
        draft_vocab=args.draft_vocab,
        penalty=args.penalty,
        window=args.window,
    )
    deadline = clock() + args.hours * 3600 if args.hours > 0 else None
    bars: dict[str, ProgressBar] = {}

    def progress(stage: str, done: int, total: int, loss: float | None) -> None:
        bars.setdefault(stage, ProgressBar(stage))(done, total, loss)

    bundle = train_drafter(
        loaded.model,
        loaded.tokenizer,
        entry.id,
        out,
        settings,
        given_rows=rows,
        self_distill=args.self_distill,
        row_length=args.row_length,
        write_batch=args.write_batch,
        on_progress=progress,
        should_stop=(lambda: clock() >= deadline) if deadline else None,
    )
    if bundle is None:
        print(
            f"stopped after {args.hours:g} hours; the progress is kept in {out}: run the same "
            "command again to go on",
            file=sys.stderr,
        )
        return 3
    val = bundle.card["validation"]
    print(f"saved {bundle.kind} drafter to {out}: held-out top-1 {val['top1']} top-3 {val['top3']}")
    return 0

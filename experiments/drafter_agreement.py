"""How well drafters agree with the default model per draft depth on the held-out suite, in
each of the app's modes, several drafters measured on the same texts. Offline and untimed.

For each mode the model writes a continuation of every suite prompt (all prompts in one
batch, transformers' `generate` with the engine's logits pipeline: the model's own text in
that mode, not `ar`'s exact tokens), then one pass over prompt and text gives the target's
distributions, and each drafter is unrolled over the written tokens (`accuracy.on_text`, its
first `head_vocab` ids and its penalty as the drafter source drafts). Precise reports how often
the drafter's top-1 is the target's greedy choice; Creative the exact probability that the
drafter's draw under the target's Gumbel noise is the target's own draw
(`accuracy.coupled_agreement`), and the top-1 beside it.

Run from the top of the checkout:
`.venv/bin/python -m experiments.drafter_agreement DIR [DIR ...] [--prompts A,B] [--tokens N]`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from swiftwriter.bench import suite
from swiftwriter.engine.decoding import drafter_files as files
from swiftwriter.engine.decoding.settings import MODES, DraftSettings
from swiftwriter.engine.decoding.textgen import encode
from swiftwriter.training import accuracy
from swiftwriter.training.selfdistill import _generate


def written(model, prompts: list[list[int]], n: int, mode: str, seed: int) -> list[list[int]]:
    """The model's continuation of each prompt in `mode`, all prompts in one left-padded batch."""
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    out = _generate(model, ids, mask, n, MODES[mode], seed)
    return [row[width:].tolist() for row in out]


def add(total: dict, got: dict) -> None:
    n = got["positions"]
    total["positions"] = total.get("positions", 0) + n
    for key in ("top1", "coupled"):
        if key in got:
            old = total.get(key, [0.0] * len(got[key]))
            total[key] = [a + b * n for a, b in zip(old, got[key], strict=True)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("drafters", nargs="+", help="drafter folders")
    ap.add_argument("--prompts", default=None, help="suite prompts (default: all)")
    ap.add_argument("--tokens", type=int, default=192)
    ap.add_argument("--modes", default="precise,creative")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--json", default=None, help="also write the table here")
    args = ap.parse_args()

    from swiftwriter.modelstore import loader, registry

    loaded = loader.load(registry.resolve(None), device="cpu", dtype=args.dtype, with_drafter=False)
    model, tokenizer = loaded.model, loaded.tokenizer
    bundles = {d: files.load(Path(d), model) for d in args.drafters}
    chosen = suite.select(suite.load_suite("held-out"), args.prompts)
    prompts = [encode(tokenizer, p.text) for p in chosen]
    limit = DraftSettings().head_vocab
    table: dict[str, dict[str, dict]] = {}
    for mode in args.modes.split(","):
        sampling = MODES[mode]
        texts = written(model, prompts, args.tokens, mode, args.seed)
        for spec, prompt, text in zip(chosen, prompts, texts, strict=True):
            ids = prompt + text
            data = accuracy.text_data(model, ids, sampling.penalty, sampling.window, sampling)
            for folder, bundle in bundles.items():
                got = accuracy.on_text(
                    model, bundle, ids, len(prompt), sampling.penalty, sampling.window,
                    vocab_limit=limit, sampling=sampling, data=data,
                )  # fmt: skip
                add(table.setdefault(mode, {}).setdefault(folder, {}), got)
                print(mode, spec.name, folder, got, flush=True)
    print(f"\n{'mode':9} {'drafter':48} {'positions':>9}  per depth 1..3")
    for mode, rows in table.items():
        for folder, total in rows.items():
            n = max(1, total["positions"])
            for key in ("top1", "coupled"):
                if key in total:
                    total[key] = [round(v / n, 4) for v in total[key]]
                    print(f"{mode:9} {folder[-48:]:48} {n:9d}  {key:8} {total[key]}")
    print(f"(dtype {loaded.dtype}, {args.tokens} tokens per prompt, seed {args.seed})")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()

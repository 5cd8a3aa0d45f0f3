"""How well drafters agree with the default model per draft depth on the held-out suite, in
each of the app's modes, several drafters measured on the same texts. Offline and untimed.

For each mode the model writes a continuation of every suite prompt (all prompts in one
batch, transformers' `generate` with the engine's logits pipeline: the model's own text in
that mode, not `ar`'s exact tokens), then one pass over prompt and text gives the target's
distributions, and each drafter is unrolled over the written tokens (`accuracy.on_text`, its
first `head_vocab` ids and its penalty as the drafter source drafts). Precise reports how often
the drafter's top-1 is the target's greedy choice; Creative the exact probability that the
drafter's draw under the target's Gumbel noise is the target's own draw
(`accuracy.coupled_agreement`), the total variation between the two (one minus what the
"fastest" sampler's rejection walk accepts a draft at) and the top-1 beside it. `--on-prompts` measures on the
prompts' own text instead (human text, one pass per prompt and mode, nothing written).

Run from the top of the checkout:
`.venv/bin/python -m experiments.drafter_agreement DIR [DIR ...] [--prompts A,B] [--tokens N]`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from swiftwriter.bench import suite
from swiftwriter.engine.decoding import drafter_files as files
from swiftwriter.engine.decoding.settings import MODES, DraftSettings
from swiftwriter.engine.decoding.textgen import encode
from swiftwriter.training import accuracy

from experiments.sampler_health import write


def written(model, prompts: list[list[int]], n: int, mode: str, seed: int) -> list[list[int]]:
    """The model's continuation of each prompt in `mode`, all prompts in one left-padded batch."""
    return write(model, prompts, n, MODES[mode], seed)


def add(total: dict, got: dict) -> None:
    n = got["positions"]
    total["positions"] = total.get("positions", 0) + n
    for key in ("top1", "coupled", "tv"):
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
    ap.add_argument(
        "--on-prompts",
        action="store_true",
        help="measure on the prompts' own text instead of the model's continuations (one pass "
        "per prompt and mode, nothing written: a cheap check on a busy machine)",
    )
    ap.add_argument(
        "--texts", default=None, help="keep the written texts here and reuse them when present"
    )
    args = ap.parse_args()

    from swiftwriter.modelstore import loader, registry

    loaded = loader.load(registry.resolve(None), device="cpu", dtype=args.dtype, with_drafter=False)
    model, tokenizer = loaded.model, loaded.tokenizer
    bundles = {d: files.load(Path(d), model) for d in args.drafters}
    chosen = suite.select(suite.load_suite("held-out"), args.prompts)
    prompts = [encode(tokenizer, p.text) for p in chosen]
    limit = DraftSettings().head_vocab
    table: dict[str, dict[str, dict]] = {}
    kept = Path(args.texts) if args.texts else None
    cache = json.loads(kept.read_text(encoding="utf-8")) if kept and kept.is_file() else {}
    for mode in args.modes.split(","):
        sampling = MODES[mode]
        key = f"{mode} {args.seed} {args.tokens} {','.join(p.name for p in chosen)}"
        if args.on_prompts:
            cache[key] = [[] for _ in prompts]
        if key not in cache:
            cache[key] = written(model, prompts, args.tokens, mode, args.seed)
            if kept:
                kept.write_text(json.dumps(cache), encoding="utf-8")
        texts = cache[key]
        for spec, prompt, text in zip(chosen, prompts, texts, strict=True):
            ids = prompt + text
            start = 1 if args.on_prompts else len(prompt)
            data = accuracy.text_data(model, ids, sampling.penalty, sampling.window, sampling)
            for folder, bundle in bundles.items():
                got = accuracy.on_text(
                    model, bundle, ids, start, sampling.penalty, sampling.window,
                    vocab_limit=limit, sampling=sampling, data=data,
                )  # fmt: skip
                add(table.setdefault(mode, {}).setdefault(folder, {}), got)
                print(mode, spec.name, folder, got, flush=True)
    print(f"\n{'mode':9} {'drafter':48} {'positions':>9}  per depth 1..3")
    for mode, rows in table.items():
        for folder, total in rows.items():
            n = max(1, total["positions"])
            for key in ("top1", "coupled", "tv"):
                if key in total:
                    total[key] = [round(v / n, 4) for v in total[key]]
                    print(f"{mode:9} {folder[-48:]:48} {n:9d}  {key:8} {total[key]}")
    on = "the prompts' own text" if args.on_prompts else f"{args.tokens} written tokens each"
    print(f"(dtype {loaded.dtype}, on {on}, seed {args.seed})")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()

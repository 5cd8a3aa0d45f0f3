"""Which sampler settings keep a long sampled take readable with the default model: every suite
prompt written to N tokens in one batch per setting (transformers' `generate` with the engine's
logits pipeline, the same seed for every setting), then per 512-token piece of each text its
surprise (bench/marathon.py: mean nats a token under the plain model; prose 1.5-2.5, a loop
near 0, word salad 3 and more), its Distinct-4 and chatter rate, and the text's last words.

This chose the Creative preset (README, "Creative that stays readable"). Run from the top of
the checkout:
`.venv/bin/python -m experiments.sampler_health "penalty=1.2" "penalty=1.05,dry_multiplier=0.8"
[--prompts A,B] [--tokens 2048] [--seed 1]`, each setting a list of SamplingSettings fields
that replace Creative's."""

from __future__ import annotations

import argparse
import json
from dataclasses import fields, replace

import torch
from swiftwriter.bench import marathon, suite
from swiftwriter.engine.decoding import chatter, quality
from swiftwriter.engine.decoding.settings import MODES, SamplingSettings
from swiftwriter.training.selfdistill import _generate

PIECE = 512


def parse(setting: str) -> SamplingSettings:
    """ "penalty=1.05,dry_multiplier=0.8" -> Creative with those fields replaced."""
    kinds = {f.name: type(getattr(MODES["creative"], f.name)) for f in fields(SamplingSettings)}
    changes = {}
    for part in filter(None, (p.strip() for p in setting.split(","))):
        key, _, value = part.partition("=")
        if key not in kinds or kinds[key] not in (int, float, bool):
            raise SystemExit(f"not a sampler number: {key}")
        changes[key] = kinds[key](float(value)) if kinds[key] is not bool else value == "true"
    return replace(MODES["creative"], **changes)


def write(model, prompts: list[list[int]], n: int, sampling: SamplingSettings, seed: int):
    """Each prompt's continuation of exactly n tokens, all in one left-padded batch."""
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    out = _generate(model, ids, mask, n, sampling, seed)
    return [row[width:].tolist() for row in out]


def health(model, prompt: list[int], text: list[int], decode, piece: int = PIECE) -> dict:
    """Surprise per piece of the text, its Distinct-4 and chatter rate."""
    nats = [
        round(marathon.surprise(model, prompt, text[:a], text[a : a + piece], piece), 2)
        for a in range(0, len(text), piece)
    ]
    return {
        "surprise": nats,
        "distinct_4": round(quality.distinct(text, 4) or 0.0, 3),
        "chatter": chatter.measure(decode(text))["rate"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("settings", nargs="+", help='e.g. "penalty=1.05,dry_multiplier=0.8"')
    ap.add_argument("--prompts", default="orchard,quarterly,ledger,design")
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args()

    from swiftwriter.engine.decoding.textgen import encode
    from swiftwriter.modelstore import loader, registry

    loaded = loader.load(registry.resolve(None), device="cpu", dtype="auto", with_drafter=False)
    model, tokenizer = loaded.model, loaded.tokenizer
    chosen = suite.select(suite.load_suite("held-out"), args.prompts)
    prompts = [encode(tokenizer, p.text) for p in chosen]
    rows = []
    for setting in args.settings:
        texts = write(model, prompts, args.tokens, parse(setting), args.seed)
        for spec, prompt, text in zip(chosen, prompts, texts, strict=True):
            row = {"setting": setting, "prompt": spec.name,
                   **health(model, prompt, text, tokenizer.decode)}  # fmt: skip
            row["tail"] = tokenizer.decode(text[-40:])
            rows.append(row)
            print(f"{setting:40} {spec.name:12} surprise by {PIECE} {row['surprise']} "
                  f"Distinct-4 {row['distinct_4']:.2f} chatter {row['chatter']:.3f}\n"
                  f"    ...{row['tail']!r}", flush=True)  # fmt: skip
    print(f"(dtype {loaded.dtype}, {args.tokens} tokens, seed {args.seed})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

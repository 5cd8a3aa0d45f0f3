"""How often the counting sources' first candidates hold the token plain decoding samples:
ranked most counted first (greedy's order) against ranked under the target's own Gumbel noise
(`sources.coupled_order`). Offline and untimed, so a busy machine cannot move it: the default
model samples each held-out prompt with the Creative preset, then the n-gram and suffix sources
replay prompt and text, proposing before each token as a run would.

Run from the top of the checkout (an experiment, not shipped in the package):
`.venv/bin/python -m experiments.source_agreement [PROMPTS] [TOKENS] [SEED]`."""

from __future__ import annotations

import sys
from dataclasses import replace

from swiftwriter.bench import suite
from swiftwriter.engine.decoding.generator import Generator
from swiftwriter.engine.decoding.logits import Draws
from swiftwriter.engine.decoding.settings import MODES, DraftSettings
from swiftwriter.engine.decoding.sources import NGramSource, SuffixMatchSource
from swiftwriter.engine.decoding.textgen import encode

SOURCES = {"ngram": NGramSource, "suffix": SuffixMatchSource}


def replay(make, prompt: list[int], text: list[int], draws: Draws | None, vocab: int) -> dict:
    """Before each token of `text`: does the source's first candidate start with it, and do its
    first three distinct first tokens hold it (over the positions where it proposes)."""
    source = make()
    source.start(MODES["creative"], vocab)
    at = [0]  # the position the next token is drawn at
    if draws is not None:
        source.couple(lambda k: draws.gumbel(at[0] + k, vocab))
    source.observe(prompt)
    context = list(prompt)
    offered = top1 = top3 = 0
    for t, token in enumerate(text):
        at[0] = t
        firsts = list(dict.fromkeys(c.tokens[0] for c in source.propose(context, 20)))
        if firsts:
            offered += 1
            top1 += firsts[0] == token
            top3 += token in firsts[:3]
        source.observe([token])
        context.append(token)
    return {"offered": offered, "top1": top1, "top3": top3}


def main(names: str, n: int, seed: int) -> None:
    from swiftwriter.modelstore import loader, registry

    loaded = loader.load(registry.resolve(None), device="cpu", dtype="auto", with_drafter=False)
    model = loaded.model
    vocab = model.get_output_embeddings().weight.shape[0]
    sampling = replace(MODES["creative"], seed=seed)
    totals: dict[tuple[str, bool], dict[str, int]] = {}
    for prompt_spec in suite.select(suite.load_suite("held-out"), names):
        prompt = encode(loaded.tokenizer, prompt_spec.text)
        gen = Generator(model, sampling, DraftSettings.plain())
        text = [t for ev in gen.generate(prompt, n) for t in ev.tokens]
        for name, make in SOURCES.items():
            for coupled in (False, True):
                got = replay(make, prompt, text, Draws(seed) if coupled else None, vocab)
                total = totals.setdefault((name, coupled), dict.fromkeys(got, 0))
                for key, value in got.items():
                    total[key] += value
                print(prompt_spec.name, name, "coupled" if coupled else "most counted", got)
    print(f"{'source':8} {'ranking':13} {'offered':>7} {'top-1':>6} {'top-3':>6}")
    for (name, coupled), t in totals.items():
        off = max(1, t["offered"])
        print(
            f"{name:8} {'shared noise' if coupled else 'most counted':13} {t['offered']:7d} "
            f"{t['top1'] / off:6.3f} {t['top3'] / off:6.3f}"
        )


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        args[0] if args else "orchard,quarterly",
        int(args[1]) if len(args) > 1 else 512,
        int(args[2]) if len(args) > 2 else 1,
    )

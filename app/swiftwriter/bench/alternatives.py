"""The selection tools' benchmark: the wall time of several alternatives written together
against one alone, on the same prompt and settings, and each alternative's text against plain
decoding of its seed (the same-text sampler must write exactly that)."""

from __future__ import annotations

import time

from swiftwriter.engine.decoding.generator import Generator
from swiftwriter.engine.decoding.settings import DraftSettings, SamplingSettings
from swiftwriter.engine.decoding.textgen import eos_ids_of
from swiftwriter.writing.alternatives import (
    alternative_sampling,
    selection_prompt,
    write_alternatives,
)


def plain_tokens(loaded, prompt: list[int], tokens: int, sampling, seed: int) -> list[int]:
    """Plain decoding's text for one seed, `tokens` long (end-of-text banned until then)."""
    gen = Generator(loaded.model, sampling, DraftSettings.plain(),
                    eos_ids=eos_ids_of(loaded.tokenizer, loaded.model))  # fmt: skip
    events = gen.generate(prompt, tokens, seed=seed, min_new_tokens=tokens)
    return [t for event in events for t in event.tokens]


def bench_alternatives(
    loaded,
    tool: str,
    passage: str,
    *,
    before: str = "",
    count: int = 3,
    tokens: int = 200,
    seeds: list[int] | None = None,
    sampling: SamplingSettings | None = None,
    drafting: DraftSettings | None = None,
    rounds: int = 2,
) -> dict:
    """{"one_s", "many_s", "ratio", "same": per seed, ...}: one alternative and `count`
    together, taken in turns `rounds` times (the fastest of each kept: a slow moment lands on
    both), every alternative exactly `tokens` long."""
    seeds = list(seeds or range(1, count + 1))
    sampling = alternative_sampling(sampling)
    common = dict(before=before, sampling=sampling, drafting=drafting,
                  max_new_tokens=tokens, min_new_tokens=tokens)  # fmt: skip
    one_s, many_s, many = [], [], None
    for _ in range(rounds):
        t = time.perf_counter()
        write_alternatives(loaded, tool, passage, count=1, seeds=seeds[:1], **common)
        one_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        many = write_alternatives(loaded, tool, passage, count=count, seeds=seeds, **common)
        many_s.append(time.perf_counter() - t)
    prompt = selection_prompt(loaded.tokenizer, tool, passage, before)
    same = {
        seed: alt.token_ids == plain_tokens(loaded, prompt, tokens, sampling, seed)
        for seed, alt in zip(seeds, many.alternatives, strict=True)
    }
    taus = [s.get("tau") for s in many.stats]
    return {
        "tool": tool, "count": count, "tokens": tokens, "seeds": seeds,
        "prompt_tokens": len(prompt), "one_s": min(one_s), "many_s": min(many_s),
        "ratio": min(many_s) / min(one_s), "same": same, "tau": taus,
        "sampler": drafting.sampler if drafting is not None else DraftSettings().sampler,
    }  # fmt: skip


def format_report(report: dict) -> str:
    same = ", ".join(f"seed {s}: {'same' if ok else 'DIFFERS'}" for s, ok in report["same"].items())
    taus = ", ".join(f"{t:.2f}" for t in report["tau"] if t is not None)
    return (
        f"{report['tool']}: {report['count']} alternatives of {report['tokens']} tokens together "
        f"took {report['many_s']:.2f} s, one alone {report['one_s']:.2f} s: "
        f"{report['ratio']:.2f}x (prompt {report['prompt_tokens']} tokens; tau {taus})\n"
        f"each against plain decoding of its seed ({report['sampler']} sampler): {same}"
    )

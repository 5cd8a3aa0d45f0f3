"""Greedy speculation must be token-identical to transformers' greedy `generate`."""

from __future__ import annotations

import random
import zlib

import pytest
import torch
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.logits import PipelineLogitsProcessor
from transformers import LogitsProcessorList


def hf_greedy(model, prompt, n, sampling, eos=None):
    ids = torch.tensor([prompt])
    out = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=n,
        do_sample=False,
        logits_processor=LogitsProcessorList([PipelineLogitsProcessor(sampling)]),
        eos_token_id=eos,
        pad_token_id=0,
        num_beams=1,
        top_k=None,
        top_p=None,
        temperature=None,
    )
    return out[0, len(prompt) :].tolist()


def ours(model, prompt, n, sampling, drafting=None, eos=()):
    gen = Generator(model, sampling, drafting, eos_ids=eos)
    out = []
    for ev in gen.generate(prompt, n):
        out.extend(ev.tokens)
    return out, gen.stats


def repetitive_prompt(rng, vocab, length):
    """Prompts that repeat phrases, so n-gram and suffix drafts are often right and often wrong."""
    phrase = [rng.randrange(2, vocab) for _ in range(rng.randint(3, 8))]
    out = []
    while len(out) < length:
        out += phrase if rng.random() < 0.6 else [rng.randrange(2, vocab)]
    return out[:length]


@pytest.mark.parametrize("arch", ["tiny_llama", "tiny_qwen2"])
@pytest.mark.parametrize("penalty", [1.0, 1.2])
def test_greedy_identical_to_hf_generate(arch, penalty, request):
    model = request.getfixturevalue(arch)
    rng = random.Random(zlib.crc32(f"{arch}{penalty}".encode()))
    total_accepted = 0
    for trial in range(4):
        length = [1, 5, 40, 200][trial]
        prompt = repetitive_prompt(rng, 256, length)
        sampling = SamplingSettings(
            greedy=True, penalty=penalty, window=rng.choice([4, 8, 64, 1024])
        )
        expected = hf_greedy(model, prompt, 300, sampling)
        # pace off: every step drafts, the speculation this test is about
        got, stats = ours(model, prompt, 300, sampling, DraftSettings(pace=False, adaptive=False))
        assert got == expected, (
            f"trial {trial}: first divergence at {next(i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b)}"
        )
        total_accepted += stats.accepted_drafts
    assert total_accepted > 0, (
        "the drafts were never accepted: the test did not exercise speculation"
    )


def test_plain_decoding_identical(tiny_llama):
    prompt = [5, 6, 7, 8]
    sampling = SamplingSettings(penalty=1.3, window=16)
    got, stats = ours(tiny_llama, prompt, 120, sampling, DraftSettings.plain())
    assert got == hf_greedy(tiny_llama, prompt, 120, sampling)
    assert stats.forward_passes == 120 and stats.tau == 1.0


def test_eos_inside_a_draft_and_short_max_tokens(tiny_llama):
    sampling = SamplingSettings(penalty=1.0)
    prompt = [3, 9, 4, 12, 3, 9, 4, 12, 3, 9]
    free, _ = ours(tiny_llama, prompt, 60, sampling)
    eos = free[25]  # a token the model will emit: treat it as EOS
    expected = hf_greedy(tiny_llama, prompt, 60, sampling, eos=eos)
    got, stats = ours(tiny_llama, prompt, 60, sampling, eos=[eos])
    assert got == expected and got[-1] == eos and stats.stop_reason == "eos"
    for n in (1, 2, 3):
        got, _ = ours(tiny_llama, prompt, n, sampling)
        assert got == free[:n]


def test_tree_with_forced_branches_is_exact(tiny_qwen2):
    """Non-adaptive wide tries (many siblings, masks, non-contiguous compaction) stay exact."""
    drafting = DraftSettings(max_nodes=48, adaptive=False)
    rng = random.Random(7)
    for _ in range(3):
        prompt = repetitive_prompt(rng, 256, 120)
        sampling = SamplingSettings(penalty=1.15, window=32)
        got, stats = ours(tiny_qwen2, prompt, 200, sampling, drafting)
        assert got == hf_greedy(tiny_qwen2, prompt, 200, sampling)
        assert stats.drafted_nodes > stats.forward_passes  # really verified trees

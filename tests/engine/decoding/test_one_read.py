"""One read from the device per step: with `batched_accept` (the default off a CPU) a greedy
step chooses every trie node's token at once on the model's device and reads the choices back,
with the drafters' states, in one synchronisation; the text stays plain decoding's."""

from __future__ import annotations

import random

import pytest
import torch
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding import run
from swiftwriter.engine.decoding.logits import PenaltyWindow
from swiftwriter.engine.decoding.sources import Candidate, CandidateSource

from tests.conftest import build_tiny

SOURCES = DraftSettings(sources=("ngram", "suffix"), max_nodes=24, adaptive=False)


def repetitive_prompt(seed: int, n: int = 120) -> list[int]:
    rng = random.Random(seed)
    phrase = [rng.randrange(2, 250) for _ in range(9)]
    return [t if rng.random() > 0.1 else rng.randrange(2, 250) for t in (phrase * 20)[:n]]


def tokens(gen: Generator, prompt, n, **kwargs) -> list[int]:
    return [t for event in gen.generate(prompt, n, **kwargs) for t in event.tokens]


def test_presences_are_presence_per_path():
    rng = random.Random(0)
    for window in (1, 4, 16):
        pw = PenaltyWindow(40, window)
        pw.extend([rng.randrange(40) for _ in range(rng.randrange(0, 30))])
        paths = [[rng.randrange(40) for _ in range(rng.randrange(0, 20))] for _ in range(12)]
        batched = pw.presences(paths)
        for i, path in enumerate(paths):
            assert torch.equal(batched[i], pw.presence(path)), (window, path)
        assert torch.equal(pw.presence_on_host(), pw.presence())


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("penalty", [1.0, 1.2])
def test_choosing_every_node_at_once_writes_plain_decodings_text(arch, dtype, penalty):
    model = build_tiny(arch, seed=4).to(dtype)
    sampling = SamplingSettings(greedy=True, penalty=penalty, window=32)
    prompt = repetitive_prompt(1)
    want = tokens(Generator(model, sampling, DraftSettings.plain()), prompt, 160)
    gen = Generator(model, sampling, SOURCES, batched_accept=True, eos_ids=[1, 7])
    got = tokens(gen, prompt, 160, min_new_tokens=40)
    plain = Generator(model, sampling, DraftSettings.plain(), eos_ids=[1, 7])
    assert got == tokens(plain, prompt, 160, min_new_tokens=40)
    assert gen.stats.tokens / gen.stats.forward_passes > 1.2  # the drafts were used
    if not {1, 7} & set(want[:40]):  # end-of-text not banned anywhere: the same text
        assert tokens(Generator(model, sampling, SOURCES, batched_accept=True), prompt, 160) == (
            want
        )


def test_a_greedy_step_reads_from_the_device_once(tiny_llama, monkeypatch):
    reads = []
    real = run.to_host
    monkeypatch.setattr(run, "to_host", lambda *t: reads.append(len(t)) or real(*t))
    sampling = SamplingSettings(greedy=True, penalty=1.2, window=64)
    gen = Generator(tiny_llama, sampling, SOURCES, batched_accept=True)
    tokens(gen, repetitive_prompt(2), 120)
    assert len(reads) == gen.stats.forward_passes  # once per step, never more
    assert reads[0] == 2  # the choices and their surprise: no drafter reads a state here
    # sampled and DRY steps too: their rows are processed one by one, still on the device
    for settings in (
        SamplingSettings(greedy=False, seed=3, penalty=1.2, window=64),
        SamplingSettings(greedy=True, dry_multiplier=0.8),
    ):
        reads.clear()
        gen = Generator(tiny_llama, settings, SOURCES, batched_accept=True)
        tokens(gen, repetitive_prompt(3), 60)
        assert len(reads) == gen.stats.forward_passes
    reads.clear()
    tokens(Generator(tiny_llama, SamplingSettings(greedy=False, seed=3), SOURCES), [5, 6], 20)
    assert reads == []  # on a CPU the walk reads node by node, as it goes


class Oracle(CandidateSource):
    """Proposes what plain decoding will write next (half right, half a wrong branch beside
    it), so sampled steps accept several drafts and reject others."""

    name = "oracle"

    def __init__(self, prompt_len: int, text: list[int]):
        self.prompt_len, self.text = prompt_len, text

    def observe(self, tokens):
        pass

    def propose(self, context, max_candidates):
        done = len(context) - self.prompt_len
        ahead = tuple(self.text[done : done + 4])
        wrong = tuple((t + 1) % 250 for t in ahead[:2])
        return [Candidate(self.name, ahead, 0), Candidate(self.name, wrong, 1)] if ahead else []


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "settings",
    [
        SamplingSettings(greedy=False, seed=11, penalty=1.2, window=32, temperature=0.8,
                         top_p=0.95, min_p=0.05),
        SamplingSettings(greedy=False, seed=12, penalty=1.0, min_p=0.1),
        SamplingSettings(greedy=True, penalty=1.2, window=32, dry_multiplier=0.8),
    ],
    ids=["creative", "tokenswift-sampler", "greedy-dry"],
)  # fmt: skip
def test_sampled_and_dry_steps_read_once_and_write_plain_decodings_text(dtype, settings):
    """The same seed writes the same text in plain decoding, the node-by-node walk and the
    one-read step: each token's uniform comes from its position, not from a stream."""
    model = build_tiny("llama", seed=4).to(dtype)
    prompt = repetitive_prompt(6)
    plain = tokens(Generator(model, settings, DraftSettings.plain()), prompt, 120)
    drafting = DraftSettings(sources=(), max_nodes=12, adaptive=False)
    for batched in (False, True):
        oracle = [Oracle(len(prompt), plain)]
        gen = Generator(model, settings, drafting, sources=oracle, batched_accept=batched)
        assert tokens(gen, prompt, 120) == plain
        assert gen.stats.tokens / gen.stats.forward_passes > 2  # many drafts taken


def test_the_default_is_the_walk_on_a_cpu_and_one_read_elsewhere(tiny_llama):
    assert Generator(tiny_llama).batched_accept is False
    assert Generator(tiny_llama, batched_accept=True).batched_accept is True


def test_end_of_text_is_allowed_exactly_from_the_min_new_tokens_th_token(tiny_qwen2):
    """Find a run where plain decoding writes end-of-text as soon as it may (token index k
    with min_new_tokens = k): the batched walk must stop at the same token."""
    sampling = SamplingSettings(greedy=True, penalty=1.2, window=32)
    prompt = repetitive_prompt(5)
    free = tokens(Generator(tiny_qwen2, sampling, DraftSettings.plain()), prompt, 80)
    for k in range(10, 70):
        eos = [free[k]]
        plain = Generator(tiny_qwen2, sampling, DraftSettings.plain(), eos_ids=eos)
        want = tokens(plain, prompt, 80, min_new_tokens=k)
        if len(want) == k + 1:
            break
    else:
        pytest.fail("no run ends right at its min_new_tokens")
    gen = Generator(tiny_qwen2, sampling, SOURCES, batched_accept=True, eos_ids=eos)
    assert tokens(gen, prompt, 80, min_new_tokens=k) == want

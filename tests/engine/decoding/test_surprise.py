"""The plain model's surprise at the text a run writes: -log p(token) under its raw
distribution, per piece of 512 tokens, the same for plain decoding and speculation, and what a
pass over the text computes by hand."""

from __future__ import annotations

import pytest
import torch
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.stats import SURPRISE_PIECE, RunStats


def test_pieces_close_every_512_tokens():
    stats = RunStats()
    stats.add_surprise([1.0] * 500)
    assert stats.surprise_by_piece == []
    stats.add_surprise([1.0] * 12 + [3.0] * 512)
    assert stats.surprise_by_piece == [1.0, 3.0]
    assert stats.as_dict()["surprise_by_piece"] == [1.0, 3.0]


@pytest.mark.parametrize("greedy", [True, False])
def test_a_run_s_surprise_is_the_model_s_and_speculation_s_is_plain_decoding_s(tiny_llama, greedy):
    sampling = SamplingSettings(greedy=greedy, penalty=1.1, window=64, seed=5, temperature=0.7)
    prompt = [5, 9, 12, 5, 9, 12, 5, 9, 12, 40, 41]
    n = SURPRISE_PIECE + 40
    runs = {}
    for name, drafting in (
        ("ar", DraftSettings.plain()),
        ("tokenswift", DraftSettings(sources=("ngram", "suffix"), pace=False, adaptive=False)),
    ):
        gen = Generator(tiny_llama, sampling, drafting)
        out = [t for event in gen.generate(prompt, n) for t in event.tokens]
        runs[name] = (out, gen.stats.surprise_by_piece)
    (text, pieces), (spec_text, spec_pieces) = runs["ar"], runs["tokenswift"]
    assert spec_text == text and spec_pieces == pieces and len(pieces) == 1
    ids = torch.tensor([prompt + text])
    with torch.inference_mode():
        logp = torch.log_softmax(tiny_llama(ids).logits[0].float(), -1)
    nats = [-float(logp[len(prompt) + i - 1, t]) for i, t in enumerate(text[:SURPRISE_PIECE])]
    assert pieces[0] == pytest.approx(sum(nats) / SURPRISE_PIECE, abs=2e-3)

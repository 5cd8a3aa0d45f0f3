"""Banned tokens (SamplingSettings.banned_tokens, the chatter counter): never written, and
speculation still writes plain decoding's text, greedy and sampled, because the one logits
pipeline bans them for every row alike."""

from __future__ import annotations

import pytest
import torch
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.logits import LogitsPipeline
from swiftwriter.errors import UserError

PROMPT = [5, 9, 12, 5, 9, 12, 5, 9]


def write(model, sampling, drafting, n=48):
    gen = Generator(model, sampling, drafting)
    return [t for ev in gen.generate(PROMPT, n) for t in ev.tokens]


def test_the_pipeline_never_keeps_a_banned_token():
    logits = torch.tensor([[0.0, 5.0, 1.0, 4.0], [3.0, 0.0, 2.0, 1.0]])
    greedy = LogitsPipeline(SamplingSettings(penalty=1.0, banned_tokens=(1, 3)))
    out = greedy.process(logits, None)
    assert out.argmax(-1).tolist() == [2, 0] and torch.isinf(out[:, [1, 3]]).all()
    assert logits[0, 1] == 5.0  # the caller's logits stay as they were
    sampled = LogitsPipeline(SamplingSettings(greedy=False, min_p=0.05, banned_tokens=(1,)))
    assert torch.isinf(sampled.process(logits[0], None)[1])
    with pytest.raises(UserError):
        SamplingSettings(banned_tokens=(-1,))


@pytest.mark.parametrize("greedy", [True, False])
def test_speculation_writes_plain_decoding_s_text_with_bans(tiny_llama, greedy):
    base = SamplingSettings(greedy=greedy, penalty=1.0, seed=3, temperature=0.8, min_p=0.05)
    free = write(tiny_llama, base, DraftSettings.plain())
    banned = tuple(sorted(set(free[:24])))[:3]  # tokens the free text writes early on
    settings = SamplingSettings(**{**base.__dict__, "banned_tokens": banned})
    plain = write(tiny_llama, settings, DraftSettings.plain())
    fast = write(tiny_llama, settings, DraftSettings(pace=False, adaptive=False))
    assert plain == fast
    assert not set(plain) & set(banned) and plain != free

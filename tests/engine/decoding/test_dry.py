"""DRY: match lengths on hand-built sequences and against a brute-force scan; the same penalty
from the engine, from the transformers adapter and at every trie node; speculation stays exact
with DRY on (greedy: token-identical to transformers; sampled: every visited node is scored as
plain decoding would score that position)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.dry import MAX_MATCH, match_lengths, penalties
from swiftwriter.engine.decoding.logits import (
    LogitsPipeline,
    PenaltyWindow,
    PipelineLogitsProcessor,
)
from swiftwriter.errors import UserError

from tests.engine.decoding.test_exactness import hf_greedy, ours, repetitive_prompt


def brute_lengths(seq, cap=MAX_MATCH):
    """text-generation-webui's DRY scan, written out plainly."""
    out = {}
    for i in range(len(seq) - 1):
        n = 0
        while n < cap and i - n >= 0 and seq[i - n] == seq[len(seq) - 1 - n]:
            n += 1
        if n:
            out[seq[i + 1]] = max(out.get(seq[i + 1], 0), n)
    return out


def test_match_lengths_by_hand():
    # "1 2 3" ends the context and occurred before, followed by 4: candidate 4 repeats 3 tokens.
    assert match_lengths(np.array([1, 2, 3, 4, 1, 2, 3])) == {4: 3}
    # The newest 5 occurs at 0, 2, 5: "5" -> 7 (n=1), "5 7 5" -> 8 (n=3), "5" -> 7 (n=1).
    assert match_lengths(np.array([5, 7, 5, 8, 9, 5, 7, 5])) == {7: 1, 8: 3}
    assert match_lengths(np.array([1, 2, 3])) == {}
    assert match_lengths(np.array([4])) == {} and match_lengths(np.array([], np.int64)) == {}
    # A run of one token: each earlier copy matches as far back as the text goes.
    assert match_lengths(np.array([6, 6, 6, 6])) == {6: 3}
    ids, amounts = penalties(np.array([5, 7, 5, 8, 9, 5, 7, 5]), 0.8, 1.75, 2)
    assert ids == [8] and amounts == pytest.approx([0.8 * 1.75])
    ids, amounts = penalties(np.array([5, 7, 5, 8, 9, 5, 7, 5]), 0.8, 1.75, 1)
    # allowed length 1: 7 (n=1) loses 0.8 * 1.75**0, 8 (n=3) loses 0.8 * 1.75**2.
    assert dict(zip(ids, amounts, strict=True)) == pytest.approx({7: 0.8, 8: 0.8 * 1.75**2})
    assert penalties(np.array([1, 2, 3, 4, 1, 2, 3]), 0.0, 1.75, 2) == ([], [])


def test_match_lengths_equal_brute_force():
    rng = random.Random(0)
    for trial in range(300):
        vocab = rng.choice([2, 3, 8, 50])
        seq = repetitive_prompt(rng, vocab, rng.randint(1, 300)) if vocab > 2 else None
        if seq is None:
            seq = [rng.randrange(vocab) for _ in range(rng.randint(1, 300))]
        assert match_lengths(np.array(seq)) == brute_lengths(seq), trial
    loop = [3, 4, 5] * 100  # a long loop hits the cap
    assert match_lengths(np.array(loop)) == brute_lengths(loop) == {3: MAX_MATCH}


def test_context_per_node_equals_brute_force():
    rng = random.Random(1)
    for window in (1, 3, 16, 64):
        pw = PenaltyWindow(50, window)
        history = []
        for _ in range(40):
            chunk = [rng.randrange(50) for _ in range(rng.choice([0, 1, 5, 30]))]
            pw.extend(chunk)
            history += chunk
            for path in ([], [rng.randrange(50)], [rng.randrange(50) for _ in range(70)]):
                expected = (history + path)[-window:]
                assert pw.context(path).tolist() == expected


def test_dry_in_the_pipeline_and_the_adapter():
    s = SamplingSettings(penalty=1.0, dry_multiplier=2.0, dry_base=2.0, dry_allowed_length=2)
    logits = torch.zeros(10)
    out = LogitsPipeline(s).process(logits, None, [1, 2, 3, 4, 1, 2, 3])
    assert out[4] == -4.0 and out.count_nonzero() == 1  # n=3: 2 * 2**(3-2)
    assert logits.count_nonzero() == 0  # the caller's logits are left alone
    torch.manual_seed(0)
    settings = SamplingSettings(
        greedy=False, penalty=1.3, window=12, min_p=0.05, dry_multiplier=0.8, dry_allowed_length=1
    )
    ids = torch.randint(0, 6, (2, 30))  # few ids: many repeats
    scores = torch.randn(2, 50) * 3
    adapter = PipelineLogitsProcessor(settings)(ids, scores.clone())
    for b in range(2):
        pw = PenaltyWindow(50, 12)
        pw.extend(ids[b].tolist())
        engine = LogitsPipeline(settings).process(scores[b], pw.presence(), pw.context())
        assert torch.equal(torch.isinf(engine), torch.isinf(adapter[b]))
        finite = ~torch.isinf(engine)
        assert torch.allclose(engine[finite], adapter[b][finite])
    plain = LogitsPipeline(SamplingSettings(greedy=False, penalty=1.3, window=12, min_p=0.05))
    assert not torch.equal(plain.process(scores[0], pw.presence()), engine)  # DRY did act


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("dry_multiplier", -1.0, "DRY multiplier"),
        ("dry_multiplier", float("nan"), "DRY multiplier"),
        ("dry_base", 0.5, "DRY base"),
        ("dry_allowed_length", 0, "DRY allowed length"),
    ],
)
def test_dry_settings_are_checked(field, value, message):
    with pytest.raises(UserError, match=message):
        SamplingSettings(**{field: value})


@pytest.mark.parametrize("arch", ["tiny_llama", "tiny_qwen2"])
def test_greedy_with_dry_identical_to_hf_generate(arch, request):
    model = request.getfixturevalue(arch)
    rng = random.Random(11)
    accepted, changed = 0, 0
    for trial, window in enumerate((16, 1024)):
        prompt = repetitive_prompt(rng, 256, 120)
        sampling = SamplingSettings(penalty=1.0, window=window, dry_multiplier=1.5)
        expected = hf_greedy(model, prompt, 150, sampling)
        # pace off: every step drafts (on a tiny model drafting may measure slower than plain
        # decoding, and the keeper would then decode plainly: this test is about drafted steps)
        got, stats = ours(
            model, prompt, 150, sampling, DraftSettings(max_nodes=24, pace=False, adaptive=False)
        )
        assert got == expected, f"trial {trial}"
        accepted += stats.accepted_drafts
        changed += got != ours(model, prompt, 150, SamplingSettings(penalty=1.0))[0]
    assert accepted > 0, "no draft was accepted: speculation was not exercised"
    assert changed, "DRY never changed the output: the test proves nothing"


class Recorder:
    """Wraps a pipeline and keeps every row it processes (one per visited trie node)."""

    def __init__(self, pipeline):
        self.inner, self.s, self.rows = pipeline, pipeline.s, []

    def process(self, logits, presence, context=None):
        out = self.inner.process(logits, presence, context)
        self.rows.append(out)
        return out

    def choose(self, processed, noise):
        return self.inner.choose(processed, noise)

    def pick(self, processed, noise):
        return self.inner.pick(processed, noise)


def test_sampled_nodes_are_scored_like_plain_decoding(tiny_vocab_model):
    """Every visited node's processed logits equal plain decoding's at that position (penalty
    and DRY over history + ancestors), and the same seed writes the same tokens as plain.
    16 token ids, so n-gram drafts of sampled text are often right."""
    model, vocab = tiny_vocab_model, 16
    sampling = SamplingSettings(
        greedy=False, penalty=1.2, window=24, min_p=0.1, dry_multiplier=1.0, seed=5
    )
    prompt = repetitive_prompt(random.Random(3), vocab, 80)
    gen = Generator(model, sampling, DraftSettings(max_nodes=16, adaptive=False))
    gen.pipeline = Recorder(gen.pipeline)
    out = [t for ev in gen.generate(prompt, 120) for t in ev.tokens]
    assert gen.stats.accepted_drafts > 0 and len(gen.pipeline.rows) == len(out)
    seq = prompt + out
    with torch.no_grad():
        logits = model(torch.tensor([seq[:-1]])).logits[0].float()
    pipeline = LogitsPipeline(sampling)
    for i, row in enumerate(gen.pipeline.rows):
        pos = len(prompt) - 1 + i
        pw = PenaltyWindow(vocab, sampling.window)
        pw.extend(seq[: pos + 1])
        plain = pipeline.process(logits[pos], pw.presence(), pw.context())
        assert torch.equal(torch.isinf(plain), torch.isinf(row)), i
        finite = ~torch.isinf(plain)
        assert torch.allclose(plain[finite], row[finite], atol=1e-4), i
    plain_out, _ = ours(model, prompt, 120, sampling, DraftSettings.plain())
    assert plain_out == out

"""The logits pipeline: penalty windows per trie node equal a brute-force recount, the
LogitsProcessor adapter equals the engine's own scoring, and filters behave."""

from __future__ import annotations

import random

import pytest
import torch
from swiftwriter.engine.decoding.logits import (
    Draws,
    LogitsPipeline,
    PenaltyWindow,
    PipelineLogitsProcessor,
)
from swiftwriter.engine.decoding.settings import SamplingSettings
from swiftwriter.errors import UserError


def brute_presence(history, path, window, vocab):
    seq = (list(history) + list(path))[-window:]
    out = torch.zeros(vocab, dtype=torch.bool)
    out[seq] = True
    return out


def test_penalty_window_matches_brute_force():
    rng = random.Random(0)
    vocab = 40
    for window in (1, 2, 5, 17, 64):
        pw = PenaltyWindow(vocab, window)
        history = []
        for _ in range(60):
            chunk = [rng.randrange(vocab) for _ in range(rng.choice([0, 1, 3, 9, 30]))]
            pw.extend(chunk)
            history += chunk
            assert torch.equal(pw.counts > 0, brute_presence(history, [], window, vocab))
            assert int(pw.counts.sum()) == min(len(history), window)
            path = [rng.randrange(vocab) for _ in range(rng.choice([1, 2, 4, 8, 70]))]
            assert torch.equal(pw.presence(path), brute_presence(history, path, window, vocab))


def test_processor_adapter_equals_engine_scoring():
    torch.manual_seed(0)
    settings = SamplingSettings(
        greedy=False, penalty=1.3, window=6, temperature=0.7, top_k=10, top_p=0.9, min_p=0.05
    )
    ids = torch.randint(0, 50, (1, 20))
    scores = torch.randn(1, 50) * 3
    pw = PenaltyWindow(50, 6)
    pw.extend(ids[0].tolist())
    ours = LogitsPipeline(settings).process(scores[0], pw.presence())
    adapter = PipelineLogitsProcessor(settings)(ids, scores.clone())[0]
    assert torch.equal(torch.isinf(ours), torch.isinf(adapter))
    finite = ~torch.isinf(ours)
    assert torch.allclose(ours[finite], adapter[finite])


def test_penalty_direction_and_filters():
    logits = torch.tensor([2.0, -2.0, 1.0, 0.5])
    presence = torch.tensor([True, True, False, False])
    out = LogitsPipeline(SamplingSettings(penalty=2.0)).process(logits, presence)
    assert out.tolist() == [1.0, -4.0, 1.0, 0.5]
    s = SamplingSettings(greedy=False, penalty=1.0, top_k=2)
    assert torch.isinf(LogitsPipeline(s).process(logits, None)).tolist() == [
        False,
        True,
        False,
        True,
    ]
    s = SamplingSettings(greedy=False, penalty=1.0, min_p=0.5)
    kept = ~torch.isinf(LogitsPipeline(s).process(logits, None))
    assert kept.tolist() == [True, False, False, False]  # p(1.0)/p(2.0) = e^-1 = 0.37 < 0.5
    probs = logits.softmax(-1)
    assert kept.tolist() == (probs >= probs.max() * 0.5).tolist()


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(penalty=0),
        dict(window=0),
        dict(temperature=0),
        dict(top_k=-1),
        dict(top_p=0),
        dict(min_p=1.0),
    ],
)
def test_absurd_settings_are_refused(kwargs):
    with pytest.raises(UserError):
        SamplingSettings(**kwargs)


def test_a_draw_among_the_kept_tokens_has_the_filtered_distribution():
    """`choose` draws among the tokens the filters kept: the frequencies match the softmax of
    the processed row and filtered ids never appear."""
    pipeline = LogitsPipeline(SamplingSettings(greedy=False, min_p=0.2))
    logits = torch.full((64,), -5.0)
    logits[[3, 10, 40, 41]] = torch.tensor([2.0, 1.5, 1.0, 0.4])
    processed = pipeline.process(logits, None)
    kept = torch.nonzero(processed != float("-inf")).squeeze(-1).tolist()
    assert kept == [3, 10, 40, 41]
    want = processed.softmax(-1)
    draws = Draws(5)
    n = 20_000
    counts = torch.zeros(64)
    for i in range(n):
        counts[pipeline.choose(processed, draws.gumbel(i, 64))] += 1
    assert counts.sum() == counts[kept].sum()
    total_variation = 0.5 * float((counts / n - want).abs().sum())
    assert total_variation < 0.015, total_variation


def filters_in_turn(logits, presence, s: SamplingSettings):
    """The pipeline as the definition reads, every filter over the whole vocabulary in its
    order: penalty, temperature, top-p (sorting every id), then min-p on what top-p kept."""
    x = torch.where(logits > 0, logits / s.penalty, logits * s.penalty)
    x = torch.where(presence, x, logits) / s.temperature
    sorted_x, order = torch.sort(x)
    drop = sorted_x.softmax(-1).cumsum(-1) <= 1 - s.top_p
    drop[-1] = False
    x = x.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    probs = x.softmax(-1)
    return x.masked_fill(probs < probs.max() * s.min_p, float("-inf"))


@pytest.mark.parametrize("top_p,min_p", [(0.95, 0.05), (0.6, 0.02), (0.99, 0.3), (1.0, 0.1)])
def test_min_p_first_keeps_what_the_filters_in_turn_keep(top_p, min_p):
    """The pipeline finds min-p's survivors first and sorts only those for top-p: the same
    ids kept with the same values as every filter applied in turn over the whole vocabulary,
    on rows shaped like a model's (a few likely ids over a long tail), one row or several."""
    s = SamplingSettings(greedy=False, penalty=1.3, temperature=0.8, top_p=top_p, min_p=min_p)
    gen = torch.Generator().manual_seed(3)
    rows, pres, kept = [], [], []
    for _ in range(40):
        logits = torch.randn(5000, generator=gen) * 2
        head = torch.randint(0, 5000, (30,), generator=gen)
        logits[head] += torch.rand(30, generator=gen) * 10
        presence = torch.rand(5000, generator=gen) < 0.05
        presence[head[:10]] = True  # the penalty reaches likely ids too
        want = filters_in_turn(logits, presence, s)
        got = LogitsPipeline(s).process(logits, presence)
        assert torch.equal(got, want)
        kept.append(int(torch.isfinite(got).sum()))
        rows.append(logits)
        pres.append(presence)
    assert max(kept) > 3 and max(kept) < 5000  # rows where the filters cut, keeping several
    batch = LogitsPipeline(s).process(torch.stack(rows), torch.stack(pres))
    assert torch.equal(batch[7], LogitsPipeline(s).process(rows[7], pres[7]))


def test_the_penalty_leaves_the_callers_logits_alone():
    logits = torch.tensor([2.0, -2.0, 1.0, 0.5])
    presence = torch.tensor([True, True, False, False])
    LogitsPipeline(SamplingSettings(penalty=2.0)).process(logits, presence)
    assert logits.tolist() == [2.0, -2.0, 1.0, 0.5]


def test_the_draw_summed_at_the_kept_entries_is_the_whole_rows_winner():
    from swiftwriter.engine.decoding.logits import gumbel_max

    draws = Draws(9)
    gen = torch.Generator().manual_seed(4)
    for i in range(200):
        row = torch.randn(300, generator=gen)
        row[torch.rand(300, generator=gen) < 0.9] = float("-inf")
        noise = draws.gumbel(i, 300)
        whole = (row.double() + noise).argmax()
        assert int(gumbel_max(row, noise)) == int(whole)


@pytest.mark.parametrize(
    "settings",
    [
        SamplingSettings(greedy=False, temperature=0.8, top_p=0.95, min_p=0.05),
        SamplingSettings(greedy=False, temperature=1.0, top_p=1.0, min_p=0.1),
        SamplingSettings(greedy=False, temperature=0.7, top_p=0.9, min_p=0.0),
        SamplingSettings(greedy=False, temperature=1.3, top_k=5, top_p=0.95, min_p=0.05),
    ],
    ids=["creative", "min-p alone", "top-p alone", "top-k"],
)
def test_a_rows_kept_ids_are_the_processed_rows_finite_entries(settings):
    """`kept` (what a drafter's draw reads) gives the ids and values `process` leaves finite,
    ids ascending, whether or not it builds the whole row."""
    pipeline = LogitsPipeline(settings)
    gen = torch.Generator().manual_seed(7)
    for _ in range(50):
        row = torch.randn(2000, generator=gen) * 3
        ids, values = pipeline.kept(row)
        whole = pipeline.process(row, None)
        assert torch.equal(ids, torch.nonzero(whole > float("-inf")).squeeze(-1))
        assert torch.equal(values, whole[ids])
        assert len(ids) < 2000 or settings.top_p >= 1.0 and settings.min_p == 0.0

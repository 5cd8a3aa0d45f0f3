"""CPU weight layouts: the [in, out] re-lay and the row-major copies for few-row passes change
which kernel runs, never what the model computes; generation stays exact."""

from __future__ import annotations

import random

import pytest
import torch
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.history_source import HistorySource
from swiftwriter.engine.passes.layout import (
    FewRowLinear,
    add_few_row_copies,
    few_rows_from,
    measure_few_rows,
    transpose_linear_weights,
)

from tests.conftest import build_tiny


@pytest.fixture
def relaid():
    model = build_tiny("llama", seed=4)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    transpose_linear_weights(model)
    return model, before


def logits(model, rows: int) -> torch.Tensor:
    ids = torch.arange(2, 2 + rows)[None]
    with torch.no_grad():
        return model(ids).logits[0]


def test_row_major_copies_serve_few_rows_and_change_nothing(relaid):
    model, before = relaid
    reference = {rows: logits(model, rows) for rows in (1, 2, 3, 5, 9)}
    assert add_few_row_copies(model, few_rows=3) == 2 * 7  # q k v o gate up down per layer
    assert isinstance(model.model.layers[0].mlp.up_proj, FewRowLinear)
    assert type(model.lm_head) is torch.nn.Linear  # the head keeps its fast [in, out] kernel
    assert set(model.state_dict()) == set(before)  # the copies are not parameters
    for rows, want in reference.items():
        torch.testing.assert_close(logits(model, rows), want, rtol=1e-5, atol=1e-5)
    # the copies really are what few-row passes read: spoil them and only those passes change
    for m in model.modules():
        if isinstance(m, FewRowLinear):
            m.weight_rows = torch.zeros_like(m.weight_rows)
    assert not torch.allclose(logits(model, 3), reference[3], atol=1e-3)
    torch.testing.assert_close(logits(model, 5), reference[5], rtol=1e-5, atol=1e-5)


def test_no_copies_over_the_memory_limit_or_when_not_faster(relaid):
    model, _ = relaid
    assert add_few_row_copies(model, few_rows=3, max_bytes=1000) == 0
    assert add_few_row_copies(model, few_rows=0) == 0
    assert not any(isinstance(m, FewRowLinear) for m in model.modules())
    assert measure_few_rows(model, candidates=(1, 2), reps=1) in (0, 1, 2)  # timing-dependent
    assert measure_few_rows(model, candidates=(1, 2), reps=1, max_bytes=1000) == 0


def test_few_rows_is_the_unbroken_run_where_the_copy_wins():
    def t(rows, cols):
        return {"rows": rows, "cols": cols}

    assert few_rows_from({1: t(1.0, 2.0), 2: t(1.0, 2.0), 4: t(2.0, 2.0)}) == 2
    assert few_rows_from({1: t(1.0, 2.0), 2: t(1.96, 2.0), 4: t(1.0, 2.0)}) == 1  # 98%: no win
    assert few_rows_from({1: t(2.0, 2.0)}) == 0
    assert few_rows_from({}) == 0


def test_generation_with_the_copies_equals_generation_without(relaid):
    """Verified with drafts of up to 3 nodes (passes of 1-4 rows: both layouts in one run)."""
    model, _ = relaid
    rng = random.Random(3)
    prompt = [rng.randrange(2, 256) for _ in range(40)]
    sampling = SamplingSettings(greedy=True, penalty=1.2, window=64)

    def run(sources=()):
        drafting = DraftSettings(sources=(), max_nodes=3, adaptive=False)
        gen = Generator(model, sampling, drafting, sources=list(sources), calibrate=False)
        return [t for ev in gen.generate(prompt, 60) for t in ev.tokens], gen.stats

    plain, _ = run()
    add_few_row_copies(model, few_rows=2)
    with_copies, stats = run([HistorySource(sequences=[prompt + plain])])
    assert with_copies == plain
    assert stats.forward_passes < 30  # drafts were verified in passes of several rows

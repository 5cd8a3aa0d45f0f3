"""The sampler-health experiment: its settings parse onto Creative, it writes every prompt to
the length asked with the same text for the same seed, and it scores each piece."""

from __future__ import annotations

import pytest
from swiftwriter.engine.decoding.settings import MODES

from experiments.sampler_health import health, parse, write


def test_a_setting_replaces_creative_s_fields_and_nothing_else():
    got = parse("penalty=1.05, dry_multiplier=0.8,window=512")
    assert (got.penalty, got.dry_multiplier, got.window) == (1.05, 0.8, 512)
    assert (got.temperature, got.top_p, got.min_p, got.greedy) == (0.8, 0.95, 0.05, False)
    assert parse("") == MODES["creative"]
    with pytest.raises(SystemExit, match="not a sampler number: colour"):
        parse("colour=3")


def test_every_prompt_is_written_and_scored_by_piece(tiny_llama):
    prompts = [[5, 9, 12, 5], [7, 8, 9]]
    setting = parse("penalty=1.05,dry_multiplier=0.8")
    texts = write(tiny_llama, prompts, 20, setting, seed=3)
    assert [len(t) for t in texts] == [20, 20]
    assert write(tiny_llama, prompts, 20, setting, seed=3) == texts
    row = health(tiny_llama, prompts[0], texts[0], lambda ids: " ".join(map(str, ids)), piece=8)
    assert len(row["surprise"]) == 3 and all(n > 0 for n in row["surprise"])
    assert 0 < row["distinct_4"] <= 1 and row["chatter"] == 0.0

"""Quality metrics against values worked out by hand."""

from __future__ import annotations

import pytest
from swiftwriter.engine.decoding.quality import distinct, repetition_by_window, summary

LOOP = [1, 2, 3, 1, 2, 3, 1, 2]


def test_distinct_n_by_hand():
    # 1-grams: 3 unique of 8; 2-grams: (1,2) (2,3) (3,1) of 7; 3-grams: 3 of 6; 4-grams: 3 of 5.
    assert distinct(LOOP, 1) == 3 / 8
    assert distinct(LOOP, 2) == 3 / 7
    assert distinct(LOOP, 3) == 3 / 6
    assert distinct(LOOP, 4) == 3 / 5
    assert distinct([4, 5, 6, 7], 2) == 1.0
    assert distinct([4, 5, 6], 4) is None and distinct([], 1) is None


def test_repetition_per_window_by_hand():
    # 4-grams end at tokens 3..7: (1,2,3,1) new | (2,3,1,2) new, (3,1,2,3) new,
    # (1,2,3,1) repeat, (2,3,1,2) repeat -> windows of 4 tokens: 0/1, then 2/4.
    assert repetition_by_window(LOOP, n=4, window=4) == [0.0, 0.5]
    # Bigrams of 5 5 5 6 5 5 end at 1..5: (5,5) new, (5,5) repeat | (5,6) new, (6,5) new,
    # (5,5) repeat -> windows of 3 tokens: 1/2, then 1/3.
    assert repetition_by_window([5, 5, 5, 6, 5, 5], n=2, window=3) == [0.5, 1 / 3]
    # A repeat counts even when its first occurrence lies in an earlier window: (7,8) ends at
    # 1 and again at 4; (8,9) at 2 and (9,7) at 3 are new -> 0/2, then 1/2.
    assert repetition_by_window([7, 8, 9, 7, 8], n=2, window=3) == [0.0, 0.5]
    assert repetition_by_window([1, 2], n=4, window=10) == []
    with pytest.raises(ValueError):
        repetition_by_window(LOOP, n=0)


def test_summary_fields():
    s = summary(LOOP, n=4, window=4)
    assert s["distinct_1"] == 0.375 and s["distinct_2"] == round(3 / 7, 4)
    assert s["distinct_3"] == 0.5 and s["distinct_4"] == 0.6
    assert s["repetition_rate"] == 0.4  # 2 repeats among 5 four-grams = 1 - Distinct-4
    assert s["repetition_by_window"] == [0.0, 0.5]
    assert s["repetition_n"] == 4 and s["repetition_window"] == 4
    empty = summary([])
    assert empty["distinct_1"] is None and empty["repetition_rate"] is None
    assert empty["repetition_by_window"] == []


def test_run_stats_carry_the_quality_of_the_output(tiny_llama):
    from swiftwriter.engine import Generator, SamplingSettings

    gen = Generator(tiny_llama, SamplingSettings(penalty=1.0))
    out = []
    for ev in gen.generate([5, 9, 12, 5, 9], 40):
        out.extend(ev.tokens)
    assert gen.stats.as_dict()["quality"] == summary(out)
    assert gen.stats.quality["distinct_1"] == round(len(set(out)) / 40, 4)

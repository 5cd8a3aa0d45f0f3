"""The take-quality report: segments of a saved take with the marathon's quality columns."""

from __future__ import annotations

from experiments.take_quality import segments, summary


def test_segments_carry_the_marathon_s_columns_and_the_summary_finds_the_weak_one():
    loop = [1, 2, 3, 4] * 5  # a loop: Distinct-4 low
    varied = list(range(10, 30))
    tokens = varied + loop
    calls = []

    def score(before, own):
        calls.append((list(before), list(own)))
        return float(len(own))

    rows = segments(tokens, 20, lambda ids: "The tide came in.", score, before=[7, 8])
    assert [(r["start"], r["end"]) for r in rows] == [(0, 20), (20, 40)]
    assert rows[0]["distinct_4"] == 1.0 and rows[1]["distinct_4"] < 0.3
    assert calls[0] == ([7, 8], varied) and calls[1] == ([7, 8, *varied], loop)
    assert rows[1]["repetition_4"] > 0.5 and rows[0]["chatter"] == 0.0
    s = summary(rows)
    assert s["segments_distinct_4_below_0_8"] == 1 and s["min_distinct_4"] == rows[1]["distinct_4"]
    assert s["surprise_first_max"] == (20.0, 20.0)

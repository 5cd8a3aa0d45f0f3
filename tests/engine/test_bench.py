"""The benchmark's report: every method on the same prompt, with the fields the issue asks for."""

from __future__ import annotations

import pytest
from swiftwriter.engine.bench import METHODS, first_divergence, format_table, run_bench
from swiftwriter.engine.history_source import HistorySource
from swiftwriter.engine.settings import SamplingSettings


def test_bench_report_fields_and_exactness(tiny_llama):
    prompt = [5, 9, 12, 5, 9, 12, 5, 9]
    sampling = SamplingSettings(penalty=1.0)
    history = [[5, 9, 12, 40, 41, 42, 43, 44, 45] * 3]
    report = run_bench(
        tiny_llama,
        prompt,
        64,
        sampling,
        METHODS,
        extra_sources=lambda: [HistorySource(sequences=history)],
    )
    assert set(report) == set(METHODS)
    for method, row in report.items():
        assert row["tokens"] == 64, method
        assert row["identical_to_hf"] is True and row["first_divergence"] is None, method
        for key in (
            "seconds",
            "tokens_per_s",
            "forward_passes",
            "tau",
            "accepted_by_source",
            "speedup_vs_hf",
        ):
            assert key in row
    assert report["hf"]["speedup_vs_hf"] == 1.0
    assert report["ar"]["tau"] == 1.0
    assert report["tokenswift"]["forward_passes"] < 64  # this prompt loops: drafts pay
    assert "tokenswift" in format_table(report)


def test_first_divergence_reports_gap(tiny_llama):
    prompt = [5, 9, 12]
    sampling = SamplingSettings(penalty=1.0)
    ref = [1, 2, 3, 4]
    div = first_divergence(tiny_llama, prompt, ref, [1, 2, 9, 4], sampling)
    assert div["index"] == 2 and div["gap"] >= 0 and isinstance(div["near_tie"], bool)
    assert first_divergence(tiny_llama, prompt, ref, list(ref), sampling) is None


def test_unknown_method_is_refused(tiny_llama):
    with pytest.raises(ValueError):
        run_bench(tiny_llama, [1, 2], 4, SamplingSettings(), ["nope"], warmup=False)

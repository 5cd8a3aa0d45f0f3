"""The benchmark's report: every method on the same prompt, with the fields the issue asks for."""

from __future__ import annotations

import copy

import pytest
import torch
from swiftwriter.bench.methods import (
    METHODS,
    MethodResult,
    _report,
    compare_seeds,
    first_divergence,
    format_comparison,
    format_table,
    output_hash,
    run_bench,
    run_seeds,
)
from swiftwriter.engine.decoding.history_source import HistorySource
from swiftwriter.engine.decoding.settings import DraftSettings, SamplingSettings


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
        # every step drafts: on a model this small the pace keeper may measure the first
        # steps (while acceptance is still being learnt) slower than plain and decode plainly,
        # and the cost model may price a tree out on one noisy timing (seen once on a 2-core AMD)
        drafting=DraftSettings(pace=False, adaptive=False),
        extra_sources=lambda: [HistorySource(sequences=history)],
    )
    assert set(report) == set(METHODS)
    for method, row in report.items():
        assert row["tokens"] == 64, method
        assert row["identical_to_hf"] is True and row["identical_to_ar"] is True, method
        assert row.get("first_divergence") is None, method
        for key in (
            "seconds",
            "tokens_per_s",
            "forward_passes",
            "tau",
            "accepted_by_source",
            "speedup_vs_hf",
            "speedup_vs_ar",
            "output_sha256",
            "quality",
        ):
            assert key in row
        assert row["output_sha256"] == report["hf"]["output_sha256"]
        ratio = report["ar"]["seconds"] / row["seconds"]  # both rounded to ms
        assert row["speedup_vs_ar"] == pytest.approx(ratio, rel=0.05)
    assert report["hf"]["speedup_vs_hf"] == 1.0 and report["ar"]["speedup_vs_ar"] == 1.0
    assert report["ar"]["tau"] == 1.0
    assert report["tokenswift"]["forward_passes"] < 64  # this prompt loops: drafts pay
    assert "tokenswift" in format_table(report)


def test_first_divergence_reports_gap(tiny_llama):
    prompt = [5, 9, 12]
    sampling = SamplingSettings(penalty=1.0)
    ref = [1, 2, 3, 4]
    div = first_divergence(tiny_llama, prompt, ref, [1, 2, 9, 4], sampling)
    with torch.inference_mode():
        logits = tiny_llama(torch.tensor([prompt + ref[:2]])).logits[0, -1].float()
    top2 = logits.topk(2)
    assert div["index"] == 2
    assert div["gap"] == pytest.approx(float(top2.values[0] - top2.values[1]), abs=1e-5)
    assert div["top2"] == sorted(int(i) for i in top2.indices)
    assert div["near_tie"] is False  # 3 and 9 are not the tied pair of a random model
    assert first_divergence(tiny_llama, prompt, ref, list(ref), sampling) is None


def test_unknown_method_is_refused(tiny_llama):
    with pytest.raises(ValueError):
        run_bench(tiny_llama, [1, 2], 4, SamplingSettings(), ["nope"], warmup=False)


def test_sampled_bench_reports_quality_not_identity(tiny_vocab_model):
    sampling = SamplingSettings(greedy=False, penalty=1.2, window=64, min_p=0.1, seed=3)
    prompt = [3, 7, 3, 7, 5, 9, 3, 7, 5]
    # A fixed trie budget: the adaptive one follows measured pass times, and on a loaded
    # machine it may draft nothing at all, so "drafts were accepted" below would be timing.
    fixed = DraftSettings(adaptive=False)
    methods = ["hf", "ar", "tokenswift", "tokenswift-fastest"]
    report = run_bench(tiny_vocab_model, prompt, 48, sampling, methods, 1, fixed)
    for method, row in report.items():
        assert row["tokens"] == 48, method
        assert row["identical_to_hf"] is None and "first_divergence" not in row, method
        assert len(row["output_sha256"]) == 64
        assert set(row["quality"]) >= {"distinct_1", "distinct_4", "repetition_rate"}
    # Exact sampling draws once per emitted token, like plain decoding: same seed, same text.
    assert report["tokenswift"]["identical_to_ar"] is True
    assert report["tokenswift"]["forward_passes"] < 48  # and drafts were accepted on the way
    assert report["tokenswift"]["quality"] == report["tokenswift"]["stats"]["quality"]
    assert report["tokenswift"]["speedup_vs_ar"] is not None  # same text: a ratio
    # the fastest sampler keeps the distribution, not the text: compared by time per token
    fastest, ar = report["tokenswift-fastest"], report["ar"]
    assert fastest["stats"]["sampler"] == "fastest" and fastest["forward_passes"] < 48
    # the report's seconds are rounded to ms and these runs take tens of ms: within 5%
    per_token = (ar["seconds"] / ar["tokens"]) / (fastest["seconds"] / fastest["tokens"])
    assert fastest["speedup_vs_ar"] == pytest.approx(per_token, rel=0.05)
    assert "tokenswift" in format_table(report)


def _result(method, tokens, seconds):
    return MethodResult(method, tokens, seconds, forward_passes=len(tokens))


def test_ratios_only_between_identical_texts(tiny_llama):
    """A method that wrote another text gets no speedup against the reference: the table says
    'diff. text' and the JSON holds null, with both speeds in their rows."""
    best = {
        "hf": _result("hf", [5, 6, 7, 8], 4.0),
        "ar": _result("ar", [5, 6, 9, 9], 2.0),
        "tokenswift": _result("tokenswift", [5, 6, 9, 9], 1.0),
    }
    report = _report(tiny_llama, [1, 2, 3], 4, SamplingSettings(penalty=1.0), best, None)
    ts, ar = report["tokenswift"], report["ar"]
    assert ts["identical_to_ar"] is True and ts["speedup_vs_ar"] == 2.0
    assert ts["identical_to_hf"] is False and ts["speedup_vs_hf"] is None
    assert ar["speedup_vs_hf"] is None and report["hf"]["speedup_vs_ar"] is None
    assert ts["first_divergence"]["index"] == 2 and ts["tokens_per_s"] == 4.0
    assert ts["output_sha256"] == ar["output_sha256"] != report["hf"]["output_sha256"]
    table = format_table(report)
    line = next(x for x in table.splitlines() if x.startswith("tokenswift"))
    assert "2.00x" in line and "diff. text" in line
    assert "tokenswift leaves hf at token 2" in table


def test_output_hash_is_the_sha256_of_the_ids():
    import hashlib

    ids = [1, 2, 49151]
    raw = b"".join(i.to_bytes(4, "little", signed=True) for i in ids)
    assert output_hash(ids) == hashlib.sha256(raw).hexdigest()
    assert output_hash(ids) != output_hash([1, 2, 49150])


def test_legacy_methods_run_the_earlier_passes(tiny_llama):
    # a copy: `.to(bfloat16)` and back would round the session's shared model for every later
    # test (and leave its merged projections pointing at the old weights)
    report = run_bench(
        copy.deepcopy(tiny_llama).to(torch.bfloat16),
        [5, 9, 12, 5, 9, 12, 5, 9],
        24,
        SamplingSettings(penalty=1.0),
        ["ar", "ar-legacy", "tokenswift-legacy"],
        warmup=False,
    )
    assert report["ar-legacy"]["stats"]["invariant"] is False
    assert report["ar"]["stats"]["invariant"] is True


def test_compare_seeds_by_hand():
    def row(d1, tau=1.0):
        q = {f"distinct_{k}": d1 for k in (1, 2, 3, 4)} | {"repetition_rate": 1 - d1}
        return {"quality": q, "tau": tau, "tokens_per_s": 10.0}

    runs = {
        1: {"hf": row(0.5), "tokenswift": row(0.6, 2.0)},
        2: {"hf": row(0.7), "tokenswift": row(0.8, 3.0)},
    }
    c = compare_seeds(runs)
    assert c["seeds"] == [1, 2]
    assert c["methods"]["hf"]["distinct_1"]["mean"] == 0.6
    assert c["methods"]["tokenswift"]["tau"] == {"values": [2.0, 3.0], "mean": 2.5, "std": 0.70711}
    test = c["tests"]["tokenswift vs hf"]["distinct_2"]
    # Means 0.7 vs 0.6, both std sqrt(0.02): t = 0.1 / sqrt(0.02) = 0.70711 with df 2.
    assert test["welch_t"] == 0.70711 and test["welch_df"] == 2.0
    assert 0 < test["welch_p"] < 1 and test["permutation_p"] == pytest.approx(4 / 6, abs=1e-5)
    assert "tokenswift vs hf" in format_comparison(c)


def test_run_seeds_compares_hf_and_tokenswift(tiny_vocab_model):
    sampling = SamplingSettings(greedy=False, penalty=1.2, window=64, min_p=0.1)
    runs = run_seeds(
        tiny_vocab_model, [3, 7, 3, 7, 5], 24, sampling, ["hf", "tokenswift"], [1, 2, 3]
    )
    assert list(runs) == [1, 2, 3]
    d1 = [rep[m]["quality"]["distinct_1"] for rep in runs.values() for m in rep]
    assert len(set(d1)) > 1, "every seed wrote equally varied text: were the seeds used?"
    assert all(rep["tokenswift"]["identical_to_hf"] is None for rep in runs.values())
    c = compare_seeds(runs)
    for metric in ("distinct_1", "distinct_4", "repetition_rate"):
        assert len(c["methods"]["hf"][metric]["values"]) == 3
        p = c["tests"]["tokenswift vs hf"][metric]["permutation_p"]
        assert 0 < p <= 1


def test_the_warm_up_runs_every_method_of_ours_that_pays_a_first_call(tiny_llama, monkeypatch):
    """One-off costs (kernels, the pass-cost calibration once per model) land in a short
    warm-up run of ar and of tokenswift, not in whichever measured run comes first."""
    from swiftwriter.bench import methods

    calls = []
    real = methods.start_method  # what run_method and run_bench start every method with

    def spy(method, model, prompt, n, *args, **kwargs):
        calls.append((method, n))
        return real(method, model, prompt, n, *args, **kwargs)

    monkeypatch.setattr(methods, "start_method", spy)
    run_bench(tiny_llama, [5, 9, 12, 5], 16, SamplingSettings(), ["ar", "tokenswift"])
    assert calls == [("ar", 8), ("tokenswift", 8), ("ar", 16), ("tokenswift", 16)]


def test_methods_taking_turns_write_the_same_texts_and_alternate(tiny_llama, monkeypatch):
    """With `turns`, our methods write in alternating turns of that many tokens (each clock
    running only in its own turns) and come out as they do one after another."""
    from swiftwriter.bench import methods as bench_methods

    prompt = [5, 9, 12, 5, 9, 12, 5, 9]
    sampling = SamplingSettings(penalty=1.0)
    drafting = DraftSettings(pace=False, adaptive=False)
    whole = run_bench(
        tiny_llama, prompt, 40, sampling, ["ar", "tokenswift"], 1, drafting, warmup=False
    )
    order = []
    real = bench_methods.Run.advance

    def logged(self, until=float("inf")):
        order.append((self.name, until, len(self.out)))
        return real(self, until)

    monkeypatch.setattr(bench_methods.Run, "advance", logged)
    turned = run_bench(
        tiny_llama,
        prompt,
        40,
        sampling,
        ["hf", "ar", "tokenswift"],
        1,
        drafting,
        warmup=False,
        turns=8,
    )
    for method in ("ar", "tokenswift"):
        assert turned[method]["output_sha256"] == whole[method]["output_sha256"]
        assert turned[method]["tokens"] == 40 and turned[method]["seconds"] > 0
    assert turned["hf"]["identical_to_ar"] is True
    names = [name for name, until, _ in order if until != float("inf")]
    assert names[:4] == ["ar", "tokenswift", "tokenswift", "ar"]  # who goes first alternates
    assert all(before < until for _, until, before in order[:2])  # each turn starts behind
    assert {until for _, until, _ in order[:2]} == {8}

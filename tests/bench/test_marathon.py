"""The marathon's segments: figures worked out by hand on synthetic runs, and a tiny model's
run with a small window, whose slides land in the segments where they happened."""

from __future__ import annotations

import pytest
import torch
from swiftwriter.bench.marathon import (
    Segments,
    format_row,
    segment_row,
    slide_totals,
    summary,
    surprise,
)
from swiftwriter.bench.methods import run_bench
from swiftwriter.engine.decoding.settings import ContextSettings, DraftSettings, SamplingSettings

# 12 tokens in 5 steps: the step ending at 4 tokens took 1 s, at 6 -> 3 s, at 9 -> 4 s, ...
TOKENS = [1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 8]
TIMES = [(2, 0.5), (4, 1.0), (6, 3.0), (9, 4.0), (12, 5.0)]
SLIDES = [(6, 1, 0.25), (12, 2, 0.5)]  # one slide in the step ending at 6, two at 12


def test_a_segment_s_figures_by_hand():
    row = segment_row(
        TOKENS, TIMES, SLIDES, 1, 4, decode=lambda ids: "Q: where\nthe story", rss_mb=9
    )
    assert (row["start"], row["end"]) == (4, 8)
    # a step belongs to the segment where it ends: tokens 5-8 hold the end of the step to 6
    # tokens only (the step to 9 ends in the next segment): 2 tokens, 1 pass, 3.0 - 1.0 s
    assert row["seconds"] == 2.0 and row["tokens_per_s"] == 1.0 and row["tokens_per_pass"] == 2.0
    assert (row["slides"], row["slide_ms"], row["rss_mb"]) == (1, 250.0, 9)
    # the segment's own tokens 1 2 3 4: nothing repeats within it
    assert row["distinct_1"] == 1.0 and row["distinct_4"] == 1.0
    # 4-grams ending at tokens 4..7: (2,3,4,1) (3,4,1,2) (4,1,2,3) new, (1,2,3,4) a repeat
    assert row["repetition_4"] == 0.25
    assert row["chatter"]["chatter_lines"] == 1 and row["chatter"]["rate"] == 0.5


def test_the_segments_add_up_to_the_run():
    first, second, last = (segment_row(TOKENS, TIMES, SLIDES, i, size=5) for i in range(3))
    assert (first["seconds"], first["tokens_per_s"], first["slides"]) == (1.0, 4.0, 0)
    assert (second["seconds"], second["tokens_per_s"], second["tokens_per_pass"]) == (
        3.0,
        1.667,
        2.5,
    )
    assert (last["start"], last["end"], last["seconds"], last["tokens_per_s"]) == (10, 12, 1.0, 3.0)
    assert (last["slides"], last["slide_ms"]) == (2, 500.0)
    assert sum(r["seconds"] for r in (first, second, last)) == TIMES[-1][1]
    assert "chatter" not in last


def test_slide_totals_read_shifts_and_reprefills():
    assert slide_totals({"slides": 3, "shifts": 2, "shift_s": 0.01, "reprefills": 1,
                         "reprefill_s": 0.5}) == (3, 0.51)  # fmt: skip
    assert slide_totals({"reprefills": 2, "reprefill_s": 1.5}) == (2, 1.5)  # older statistics


def test_summary_of_segments():
    rows = [
        segment_row(TOKENS, TIMES, SLIDES, i, 4, decode=lambda ids: "The tide came in.", rss_mb=m)
        for i, m in enumerate((100, 120, 126))
    ]
    s = summary(rows)
    assert s["segments"] == 3 and s["slides"] == 3 and s["slide_s"] == 0.75
    assert s["slide_share"] == pytest.approx(0.75 / 5, abs=1e-4)
    assert (s["rss_mb_first_slide"], s["rss_mb_end"]) == (120, 126)
    assert s["chatter_rate"] == 0.0 and s["min_distinct_4"] == 1.0


def test_a_tiny_model_s_marathon_reports_every_segment_with_its_slides(tiny_llama):
    """A window of 48 tokens over 120 new ones: the window slides; ar and tokenswift write the
    same text, and every 40-token segment of each is reported as it ends, in turns."""
    emitted = []
    segments = Segments(
        40, decode=lambda ids: " ".join(map(str, ids)), emit=lambda m, r: emitted.append((m, r))
    )
    report = run_bench(
        tiny_llama,
        [5, 9, 12, 5, 9, 12, 5, 9],
        120,
        SamplingSettings(penalty=1.0),
        ["ar", "tokenswift"],
        drafting=DraftSettings(pace=False, adaptive=False),
        warmup=False,
        context=ContextSettings(policy="slide", sink=4),
        segments=segments,
        context_limit=48,
    )
    assert [(m, r["segment"]) for m, r in emitted] == [
        ("ar", 0), ("tokenswift", 0), ("tokenswift", 1), ("ar", 1), ("ar", 2), ("tokenswift", 2)
    ]  # fmt: skip
    for method in ("ar", "tokenswift"):
        row = report[method]
        rows = row["segments"]
        assert [(r["start"], r["end"]) for r in rows] == [(0, 40), (40, 80), (80, 120)]
        slides, seconds = slide_totals(row["stats"])
        assert slides >= 2 and sum(r["slides"] for r in rows) == slides
        assert sum(r["slide_ms"] for r in rows) == pytest.approx(1000 * seconds, abs=0.5)
        assert all(r["tokens_per_s"] and r["rss_mb"] and r["distinct_1"] for r in rows)
        assert all(r["chatter"]["words"] for r in rows)
        assert row["marathon"]["segments"] == 3 and row["marathon"]["slides"] == slides
        assert format_row(method, rows[0]).startswith(method)
    assert report["tokenswift"]["identical_to_ar"] is True
    assert all(r["identical_to_ar"] for r in report["tokenswift"]["segments"])
    nats = [r["surprise"] for r in report["ar"]["segments"]]
    assert [r["surprise"] for r in report["tokenswift"]["segments"]] == nats
    assert all(0 < n < 20 for n in nats) and report["ar"]["marathon"]["max_surprise"] == max(nats)


def test_surprise_is_the_mean_negative_log_likelihood_read_in_pieces(tiny_llama):
    """Pieces of 3 tokens after at most SURPRISE_CONTEXT tokens: the same figure as one pass
    over the whole text (the text is far shorter than the context), computed by hand."""
    prompt, before, tokens = [5, 9, 12], [7, 8], [3, 4, 5, 6, 7, 8, 9]
    ids = torch.tensor([prompt + before + tokens])
    with torch.inference_mode():
        logp = torch.log_softmax(tiny_llama(ids).logits[0].float(), -1)
    first = len(prompt) + len(before)
    want = -sum(float(logp[i - 1, ids[0, i]]) for i in range(first, ids.shape[1])) / len(tokens)
    assert surprise(tiny_llama, prompt, before, tokens, piece=3) == pytest.approx(want, rel=1e-4)


def test_word_salad_surprises_the_model_more_than_its_own_text(tiny_llama):
    """The model's greedy continuation against uniformly random tokens of its vocabulary:
    Distinct-n scores both near 1; surprise tells them apart."""
    prompt = [5, 9, 12, 5, 9]
    ids = tiny_llama.generate(torch.tensor([prompt]), max_new_tokens=40, do_sample=False)
    own = ids[0, len(prompt) :].tolist()
    vocab = tiny_llama.config.vocab_size
    salad = torch.randint(0, vocab, (40,), generator=torch.Generator().manual_seed(0)).tolist()
    assert surprise(tiny_llama, prompt, [], own) + 1.0 < surprise(tiny_llama, prompt, [], salad)


def test_surprise_with_nothing_before_scores_from_the_second_token(tiny_llama):
    tokens = [3, 4, 5, 6, 7]
    ids = torch.tensor([tokens])
    with torch.inference_mode():
        logp = torch.log_softmax(tiny_llama(ids).logits[0].float(), -1)
    want = -sum(float(logp[i - 1, tokens[i]]) for i in range(1, 5)) / 4
    assert surprise(tiny_llama, [], [], tokens, piece=2) == pytest.approx(want, rel=1e-4)

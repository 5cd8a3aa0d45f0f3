"""The held-out suite: enough prompts in enough genres, each with its provenance, none of them
seen in training; the summary's geometric means; `bench --suite` on a tiny model."""

from __future__ import annotations

import inspect
import json
import math

import pytest
from swiftwriter.bench import suite
from swiftwriter.cli import main
from swiftwriter.errors import UserError
from swiftwriter.training import openers

from tests.commands.tiny_cli import install_tiny
from tests.conftest import build_tiny


def test_the_suite_has_twelve_prompts_in_five_genres_with_provenance():
    prompts = suite.load_suite("held-out")
    assert len(prompts) >= 12
    assert len({p.genre for p in prompts}) >= 5
    assert len({p.name for p in prompts}) == len(prompts)
    for p in prompts:
        assert p.licence and p.source and p.genre
        assert 150 <= len(p.text.split()) <= 450, p.name  # 200-600 tokens: see the tokenizer test
    readme = (suite.suite_dir() / "README.md").read_text(encoding="utf-8")
    assert all(f"`{p.name}.txt`" in readme for p in prompts)


def training_texts() -> list[str]:
    """Everything a shipped drafter trained on that lives in the repository: the
    self-distillation openers (the rest of its text the model wrote itself from them)."""
    return [*openers.OPENERS, inspect.getsource(openers)]


def test_no_suite_prompt_shares_an_8_gram_with_the_training_text():
    training = training_texts()
    for p in suite.load_suite("held-out"):
        assert not suite.leaked(p.text, training), p.name


def test_the_leak_check_finds_a_copied_run_of_eight_words():
    prompt = suite.load_suite("held-out")[0].text
    words = prompt.split()
    copied = "An opener that quotes " + " ".join(words[40:48]) + " and goes on."
    assert suite.leaked(prompt, [copied])
    assert not suite.leaked(prompt, [" ".join(words[40:47])])  # seven words are not a leak


@pytest.mark.default_model
def test_suite_prompts_are_200_to_600_tokens_of_the_default_model():
    from swiftwriter.modelstore import registry
    from transformers import AutoTokenizer

    entry = registry.default_entry()
    tokenizer = AutoTokenizer.from_pretrained(entry.folder(), local_files_only=True)
    for p in suite.load_suite("held-out"):
        count = len(tokenizer(p.text, add_special_tokens=False).input_ids)
        assert 200 <= count <= 600, (p.name, count)


def test_select_keeps_the_order_asked_and_refuses_unknown_names():
    prompts = suite.load_suite("held-out")
    names = [p.name for p in suite.select(prompts, f"{prompts[3].name},{prompts[0].name}")]
    assert names == [prompts[3].name, prompts[0].name]
    with pytest.raises(UserError, match="nosuch"):
        suite.select(prompts, "nosuch")


def row(tps, vs_ar=None, vs_hf=None, same=True, tau=None):
    return {
        "tokens_per_s": tps,
        "speedup_vs_ar": vs_ar,
        "speedup_vs_hf": vs_hf,
        "identical_to_ar": same,
        "tau": tau,
    }


def test_summary_takes_geometric_means_over_identical_texts_only():
    reports = {
        "a": {"ar": row(10, 1.0, 2.0), "ts": row(20, 2.0, 4.0, tau=2.0)},
        "b": {"ar": row(10, 1.0, 2.0), "ts": row(5, 0.5, 1.0, tau=1.0)},
        "c": {"ar": row(10, 1.0, 2.0), "ts": row(30, None, None, same=False, tau=3.0)},
    }
    s = suite.means_by_method(reports)
    assert s["ts"]["geomean_vs_ar"] == 1.0  # sqrt(2.0 * 0.5); c wrote another text
    assert s["ts"]["geomean_vs_hf"] == 2.0
    assert s["ts"]["min_vs_ar"] == 0.5 and s["ts"]["slowest"] == "b"
    assert s["ts"]["different_from_ar"] == 1
    assert s["ts"]["mean_tau"] == 2.0
    assert s["ts"]["geomean_tokens_per_s"] == pytest.approx(round((20 * 5 * 30) ** (1 / 3), 3))
    assert s["ar"]["geomean_vs_hf"] == 2.0
    table = suite.format_summary(s)
    assert "0.50x b" in table and "1.00x" in table
    assert suite.geometric_mean([]) is None
    assert math.isclose(suite.geometric_mean([1.0, 4.0]), 2.0)


@pytest.fixture
def tiny_suite(monkeypatch, tmp_path):
    """A two-prompt suite of token ids for the tiny model (the id tokenizer reads numbers)."""
    install_tiny(monkeypatch, build_tiny("llama", vocab=16, seed=3))
    (tmp_path / "one.txt").write_text("3 7 3 7 5 9 3 7 5 11 3 7")
    (tmp_path / "two.txt").write_text("2 4 6 8 2 4 6 8 2 4 6")
    manifest = "".join(
        f'[[prompt]]\nname = "{n}"\ngenre = "g{n}"\nsource = "test"\nlicence = "CC0-1.0"\n'
        for n in ("one", "two")
    )
    (tmp_path / "suite.toml").write_text(manifest)
    monkeypatch.setattr(suite, "suite_dir", lambda name="held-out": tmp_path)
    return ["bench", "--suite", "held-out", "--max-new-tokens", "24", "--no-heads"]


def test_bench_suite_reports_every_prompt_and_the_geometric_means(tiny_suite, tmp_path, capsys):
    out = tmp_path / "suite.json"
    methods = ["--methods", "hf,ar,tokenswift-noheads"]
    assert main([*tiny_suite, *methods, "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["meta"]["suite"] == "held-out"
    assert list(report["prompts"]) == ["one", "two"]
    rows = [report["prompts"][n]["by_seed"]["None"]["tokenswift-noheads"] for n in ("one", "two")]
    assert all(r["identical_to_ar"] and r["identical_to_hf"] for r in rows)
    summary = report["summary"]["tokenswift-noheads"]
    assert summary["prompts"] == 2 and summary["different_from_ar"] == 0
    ratios = [r["speedup_vs_ar"] for r in rows]
    assert summary["geomean_vs_ar"] == pytest.approx(math.sqrt(ratios[0] * ratios[1]), abs=2e-3)
    printed = capsys.readouterr().out
    assert "== one" in printed and "== two" in printed and "vs ar (gm)" in printed


def test_bench_suite_subset_and_sampled_seeds(tiny_suite, tmp_path):
    out = tmp_path / "suite.json"
    args = ["--prompts", "two", "--methods", "ar,tokenswift-noheads", "--sampling", "sample"]
    assert main([*tiny_suite, *args, "--seeds", "1,2", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert list(report["prompts"]) == ["two"]
    assert set(report["prompts"]["two"]["by_seed"]) == {"1", "2"}
    assert report["summary"]["tokenswift-noheads"]["prompts"] == 2  # one per seed


@pytest.mark.parametrize(
    "args, message",
    [
        (["--prompts", "three"], "Unknown suite prompts"),
        (["--prompt-file", "x.txt"], "drop --prompt-file"),
    ],
)
def test_bad_suite_options_are_one_clear_line(tiny_suite, args, message, capsys):
    assert main([*tiny_suite, "--methods", "ar", *args]) == 1
    assert message in capsys.readouterr().err


def test_prompts_without_a_suite_is_refused(capsys):
    assert main(["bench", "--prompts", "orchard", "--methods", "ar"]) == 1
    assert "--suite" in capsys.readouterr().err


def test_the_summary_weighs_the_drafters_hits_by_positions():
    reports = {
        "a": {
            "ar": {
                **row(10.0),
                "drafter_accuracy": {"top1": [0.5, 0.2], "top3": [0.9, 0.5], "positions": 300},
            }
        },
        "b": {
            "ar": {
                **row(10.0),
                "drafter_accuracy": {"top1": [0.1, 0.0], "top3": [0.5, 0.1], "positions": 100},
            }
        },
        "c": {"ar": row(10.0)},
    }
    hits = suite.means_by_method(reports)["ar"]["drafter_accuracy"]
    assert hits == {"top1": [0.4, 0.15], "top3": [0.8, 0.4], "positions": 400}
    assert "top-1 by position 0.40 / 0.15" in suite.format_summary(suite.means_by_method(reports))

"""`swiftwriter bench --sampling / --seeds / --dry` on a tiny random model (in process, with the
model loader replaced, so nothing is converted or downloaded)."""

from __future__ import annotations

import argparse
import json

import pytest
from swiftwriter.cli import main

from tests.commands.tiny_cli import install_tiny
from tests.conftest import build_tiny


@pytest.fixture
def tiny_bench(monkeypatch, tmp_path):
    install_tiny(monkeypatch, build_tiny("llama", vocab=16, seed=3))
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("3 7 3 7 5 9 3 7 5 11 3 7")
    return ["bench", "--prompt-file", str(prompt), "--max-new-tokens", "32"]


def test_sampled_bench_over_seeds(tiny_bench, tmp_path, capsys):
    out = tmp_path / "report.json"
    args = ["--methods", "hf,tokenswift", "--sampling", "sample", "--seeds", "1,2,3"]
    assert main([*tiny_bench, *args, "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["meta"]["sampling"] == "sample" and report["meta"]["seeds"] == [1, 2, 3]
    assert report["meta"]["min_p"] == 0.1
    assert set(report["by_seed"]) == {"1", "2", "3"}
    for seed_report in report["by_seed"].values():
        assert seed_report["tokenswift"]["identical_to_hf"] is None
        assert "distinct_4" in seed_report["hf"]["quality"]
    test = report["comparison"]["tests"]["tokenswift vs hf"]["distinct_2"]
    assert 0 < test["permutation_p"] <= 1
    assert len(report["comparison"]["methods"]["hf"]["distinct_1"]["values"]) == 3
    printed = capsys.readouterr().out
    assert "seed 3" in printed and "n/a" in printed and "Welch / permutation" in printed


def test_greedy_bench_with_dry_stays_exact(tiny_bench, tmp_path):
    out = tmp_path / "report.json"
    args = ["--methods", "hf,tokenswift", "--penalty", "1", "--dry", "1.5", "--json", str(out)]
    assert main([*tiny_bench, *args]) == 0
    report = json.loads(out.read_text())
    assert report["meta"]["dry"] == {"multiplier": 1.5, "base": 1.75, "allowed_length": 2}
    assert report["methods"]["tokenswift"]["identical_to_hf"] is True
    assert "comparison" not in report and report["meta"]["seeds"] == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sampling", "sample", "--seeds", "1,x"], "whole numbers"),
        (["--sampling", "sample", "--seeds", "4,4"], "distinct seeds"),
        (["--seed", "3"], "--sampling sample only"),
        (["--dry", "1", "--dry-base", "0.5"], "DRY base"),
    ],
)
def test_bad_bench_options_are_one_clear_line(tiny_bench, args, message, capsys):
    assert main([*tiny_bench, "--methods", "hf", *args]) == 1
    assert message in capsys.readouterr().err


def test_negative_turns_are_refused_by_the_parser(tiny_bench, capsys):
    with pytest.raises(SystemExit) as stopped:
        main([*tiny_bench, "--methods", "ar", "--turns", "-64"])
    assert stopped.value.code == 2
    assert "--turns: must be zero or more, not -64" in capsys.readouterr().err


@pytest.fixture
def small_context_bench(monkeypatch, tmp_path):
    """The tiny bench with a 64-position model, so 160 new tokens must slide the window."""
    install_tiny(monkeypatch, build_tiny("llama", vocab=16, seed=3, max_positions=64))
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("3 7 3 7 5 9 3 7 5 11 3 7")
    return ["bench", "--prompt-file", str(prompt), "--max-new-tokens", "160", "--no-heads"]


def test_sliding_context_bench_is_exact_against_ar_and_reports_memory(
    small_context_bench, tmp_path, capsys
):
    out = tmp_path / "report.json"
    args = ["--methods", "ar,tokenswift-noheads", "--context-policy", "slide"]
    assert main([*small_context_bench, *args, "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["meta"]["context_policy"] == "slide"
    ar, ours = report["methods"]["ar"], report["methods"]["tokenswift-noheads"]
    assert ar["tokens"] == ours["tokens"] == 160
    assert ours["stats"]["windowed_from"] is not None and ours["stats"]["shifts"] >= 1
    assert ours["stats"]["kv_tokens_max"] <= 64
    assert ours["rss_mb"] and all(mb > 0 for _, mb in ours["rss_mb"])
    assert ours["identical_to_ar"] is True  # the same windowed model, the same tokens
    printed = capsys.readouterr().out
    assert "windowed from token" in printed and "KV held at most" in printed


def test_the_window_may_still_slide_by_re_reading_it(small_context_bench, tmp_path):
    out = tmp_path / "report.json"
    args = ["--methods", "ar,tokenswift-noheads", "--context-policy", "slide"]
    assert main([*small_context_bench, *args, "--slide-mode", "reprefill", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["meta"]["slide_mode"] == "reprefill"
    ours = report["methods"]["tokenswift-noheads"]
    assert ours["stats"]["reprefills"] == ours["stats"]["slides"] >= 1
    assert ours["stats"]["shifts"] == 0 and ours["identical_to_ar"] is True


def test_hf_cannot_slide(small_context_bench, capsys):
    args = ["--methods", "hf,tokenswift", "--context-policy", "slide"]
    assert main([*small_context_bench, *args]) == 1
    assert "hf has no sliding context window" in capsys.readouterr().err


def test_presets_run_exactly_the_apps_mode_and_strategy(tiny_bench, tmp_path, qtbot):
    """`--preset creative --strategy fast` takes the app's own settings objects (the panel
    builds its defaults from the same ones), and the names the parser offers are theirs."""
    from swiftwriter.commands.bench import register
    from swiftwriter.engine.decoding.settings import MODES, STRATEGIES
    from swiftwriter.ui.take_panel import PANEL_ACTIONS, TakePanel

    sub = argparse.ArgumentParser().add_subparsers()
    register(sub)
    options = sub.choices["bench"]._option_string_actions
    assert options["--preset"].choices == sorted(MODES)
    assert options["--strategy"].choices == list(STRATEGIES)
    # and --help describes the modes as they are now (it once still said penalty 1.2)
    helped = " ".join(sub.choices["bench"].format_help().split())
    creative, precise = MODES["creative"], MODES["precise"]
    assert (
        f"creative: temperature {creative.temperature}, top-p {creative.top_p}, min-p "
        f"{creative.min_p}, penalty {creative.penalty} over {creative.window:,}, DRY "
        f"{creative.dry_multiplier}; precise: greedy, penalty {precise.penalty} over "
        f"{precise.window:,}" in helped
    ) and precise.greedy
    out = tmp_path / "report.json"
    args = ["--methods", "ar,tokenswift", "--preset", "creative", "--strategy", "fast"]
    assert main([*tiny_bench, *args, "--seeds", "1,2", "--json", str(out)]) == 0
    meta = json.loads(out.read_text())["meta"]
    creative = MODES["creative"]
    assert meta["sampling"] == "sample" and meta["preset"] == "creative"
    assert (meta["temperature"], meta["top_p"], meta["min_p"], meta["penalty"],
            meta["dry"]["multiplier"]) == (
        creative.temperature, creative.top_p, creative.min_p, creative.penalty,
        creative.dry_multiplier,
    )  # fmt: skip
    assert meta["strategy"] == "fast" and creative.temperature != 1.0
    from PySide6.QtGui import QAction

    panel = TakePanel({name: QAction(name) for name in PANEL_ACTIONS})
    qtbot.addWidget(panel)
    panel.creative.setChecked(True)
    from dataclasses import replace

    assert panel.sampling() == replace(creative, seed=None)
    assert panel.drafting() == STRATEGIES["balanced"]


def test_options_given_take_the_place_of_the_preset_s_values(tiny_bench, tmp_path, capsys):
    """`--preset creative --temperature 0.5 --penalty 1.3` runs Creative with those two values
    (the preset once overrode them silently); with greedy text a sampler option is refused."""
    from swiftwriter.engine.decoding.settings import MODES

    out = tmp_path / "report.json"
    args = ["--methods", "ar", "--preset", "creative", "--temperature", "0.5", "--penalty", "1.3"]
    assert main([*tiny_bench, *args, "--json", str(out)]) == 0
    meta = json.loads(out.read_text())["meta"]
    creative = MODES["creative"]
    assert (meta["temperature"], meta["penalty"]) == (0.5, 1.3)
    assert (meta["top_p"], meta["min_p"], meta["window"], meta["dry"]["multiplier"]) == (
        creative.top_p, creative.min_p, creative.window, creative.dry_multiplier,
    )  # fmt: skip
    capsys.readouterr()
    assert main([*tiny_bench, "--methods", "ar", "--preset", "precise", "--top-p", "0.5"]) == 1
    assert "--top-p applies to sampled text, and --preset precise is greedy decoding" in (
        capsys.readouterr().err
    )


def lossy_walk(monkeypatch, at: int = 5):
    """A deliberately wrong engine: a run with candidate sources (speculation) writes another
    token than the target's at position `at` (what a lossy acceptance would do; the state stays
    consistent, as if the target had chosen it). `ar`, which drafts nothing, is unchanged."""
    from swiftwriter.engine.decoding.run import Run

    walk = Run._walk

    def wrong(self, trie, remaining):
        path, new = walk(self, trie, remaining)
        k = at - len(self.produced)
        if self.sources and 0 <= k < len(new):
            path, new = path[:k], [*new[:k], (new[k] + 1) % 16]
        return path, new

    monkeypatch.setattr(Run, "_walk", wrong)


def test_bench_fails_when_speculation_writes_another_text(tiny_bench, monkeypatch, capsys):
    args = [*tiny_bench, "--methods", "ar,tokenswift-noheads", "--no-heads"]
    assert main(args) == 0  # the real engine: the same text, exit 0
    capsys.readouterr()
    lossy_walk(monkeypatch)
    assert main(args) == 1
    err = capsys.readouterr().err
    prompt = tiny_bench[2]
    assert f"swiftwriter: tokenswift-noheads wrote another text than ar (prompt {prompt})" in err


def test_sampled_bench_names_the_seed_that_differs(tiny_bench, monkeypatch, capsys):
    lossy_walk(monkeypatch)
    args = ["--methods", "ar,tokenswift-noheads", "--no-heads", "--sampling", "sample"]
    assert main([*tiny_bench, *args, "--seeds", "4,5"]) == 1
    lines = [x for x in capsys.readouterr().err.splitlines() if "another text" in x]
    assert [x.rsplit(", ", 1)[-1] for x in lines] == ["seed 4)", "seed 5)"]


def test_bench_takes_the_history_project_as_its_argument(tiny_bench, tmp_path, capsys):
    from swiftwriter.store import Project

    path = tmp_path / "History.swiftwriter"
    with Project.create(path) as proj:
        proj.add_document("Chapter", "3 7 5 9 3 7 5 11 " * 8)
    quick = [*tiny_bench, "--methods", "ar", "--no-heads"]
    assert main([*quick, str(path)]) == 0
    new = capsys.readouterr()
    assert f"history: 64 tokens from {path}" in new.err and "tokenswift+history" in new.out
    assert "deprecated" not in new.err
    assert main([*quick, "--history", str(path)]) == 0  # the old spelling, for scripts
    old = capsys.readouterr()
    assert old.out.count("tokenswift+history") == new.out.count("tokenswift+history")
    assert "--history PROJECT is deprecated: write bench PROJECT" in old.err
    assert main([*quick, str(path), "--history", str(path)]) == 2


def test_bench_runs_where_the_other_commands_run(tiny_bench):
    from swiftwriter.cli import build_parser

    args = build_parser().parse_args(["bench"])
    assert (args.device, args.dtype) == ("auto", "auto")

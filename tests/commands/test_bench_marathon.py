"""`swiftwriter bench --context-policy slide`: the marathon's segments printed as they end, in
the JSON and drawn by --plot, on a tiny random model with a small window (so it slides)."""

from __future__ import annotations

import json

from swiftwriter.bench.marathon import slide_totals
from swiftwriter.cli import main

from tests.commands.tiny_cli import install_tiny
from tests.conftest import build_tiny


def test_a_sliding_bench_reports_segments_as_it_goes(monkeypatch, tmp_path, capsys):
    install_tiny(monkeypatch, build_tiny("llama", seed=1))
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("5 9 12 5 9 12 5 9 12 40 41 5 9")
    out, png = tmp_path / "r.json", tmp_path / "marathon.png"
    args = ["bench", "--prompt-file", str(prompt), "--max-new-tokens", "90", "--context-policy",
            "slide", "--context-limit", "40", "--segment", "30", "--no-heads"]  # fmt: skip
    assert main([*args, "--json", str(out), "--plot", str(png)]) == 0
    printed = capsys.readouterr().out.splitlines()
    rows = [line for line in printed if line.startswith(("ar ", "tokenswift "))]
    assert [line.split()[:2] for line in rows[:4]] == [
        ["ar", "0-30"], ["tokenswift", "0-30"], ["tokenswift", "30-60"], ["ar", "30-60"]
    ]  # fmt: skip
    report = json.loads(out.read_text())
    assert report["meta"]["segment"] == 30 and report["meta"]["context_limit"] == 40
    assert set(report["methods"]) == {"ar", "tokenswift"}  # the default methods of a slide
    for name, row in report["methods"].items():
        assert [r["end"] for r in row["segments"]] == [30, 60, 90], name
        assert row["marathon"]["slides"] == slide_totals(row["stats"])[0] > 0
        assert any(line.startswith(f"{name}: 3 segments, ") for line in printed)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_context_limit_is_for_our_methods_only(monkeypatch, tmp_path, capsys):
    install_tiny(monkeypatch, build_tiny("llama", seed=1))
    assert main(["bench", "--methods", "hf,ar", "--context-limit", "40"]) != 0
    assert "our methods only" in capsys.readouterr().err

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


def test_ban_chatter_bans_the_marks_in_every_method_alike(monkeypatch, tmp_path):
    """Tokens whose text holds a mark only chatter writes are never written; ar and tokenswift
    still write one text, another than without the ban."""
    from swiftwriter.modelstore import loader

    from tests.commands.tiny_cli import IdTokenizer

    class Marked(IdTokenizer):
        eos_token_id = 1

        def __len__(self):
            return 256

        def convert_ids_to_tokens(self, ids):
            return ["**" if i < 128 else f"w{i}" for i in ids]  # 1 is the end of text

    install_tiny(monkeypatch, build_tiny("llama", seed=1))
    real = loader.load()  # the tiny model's LoadedModel, given the marked tokenizer below
    real.tokenizer = Marked()
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("5 9 12 5 9 12 5 9 12 40 41 5 9")
    args = ["bench", "--prompt-file", str(prompt), "--max-new-tokens", "24", "--methods",
            "ar,tokenswift", "--no-heads", "--json"]  # fmt: skip
    reports = {}
    for flag in ([], ["--ban-chatter"]):
        out = tmp_path / f"r{len(flag)}.json"
        assert main([*args, str(out), *flag]) == 0
        reports[bool(flag)] = json.loads(out.read_text())
    assert reports[True]["meta"]["banned_tokens"] == 127  # the end of text kept
    banned, free = reports[True]["methods"], reports[False]["methods"]
    assert banned["tokenswift"]["identical_to_ar"] is True
    assert banned["ar"]["output_sha256"] != free["ar"]["output_sha256"]

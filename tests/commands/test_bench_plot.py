"""`swiftwriter bench --plot / --checkpoints`: the speed curve per method in the JSON (speedup
over hf and tokens/s at checkpoints) and a PNG drawn from it, on a tiny random model."""

from __future__ import annotations

import json
import sys

import pytest
from swiftwriter.bench import curves
from swiftwriter.cli import main

from tests.commands.tiny_cli import install_tiny
from tests.conftest import build_tiny


@pytest.fixture
def bench_args(monkeypatch, tmp_path):
    install_tiny(monkeypatch, build_tiny("llama", seed=1))
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("5 9 12 5 9 12 5 9 12 40 41 5 9")
    return ["bench", "--prompt-file", str(prompt), "--methods", "hf,hf-lookup,ar,tokenswift"]


def test_bench_writes_the_curve_and_a_png(bench_args, tmp_path):
    out, png = tmp_path / "r.json", tmp_path / "speed.png"
    args = [*bench_args, "--max-new-tokens", "64", "--json", str(out), "--plot", str(png)]
    assert main(args) == 0
    methods = json.loads(out.read_text())["methods"]
    assert set(methods) == {"hf", "hf-lookup", "ar", "tokenswift"}
    for name, row in methods.items():
        assert [p["tokens"] for p in row["curve"]] == [16, 32, 64], name
        assert all(p["seconds"] > 0 and p["tokens_per_s"] > 0 for p in row["curve"])
        seconds = [p["seconds"] for p in row["curve"]]
        assert seconds == sorted(seconds) and seconds[-1] <= row["seconds"] + 1e-3
        assert row["timeline"][-1][0] == 64 and len(row["timeline"]) <= 64
    assert all(p["speedup_vs_hf"] == 1.0 for p in methods["hf"]["curve"])
    assert methods["tokenswift"]["curve"][-1]["speedup_vs_hf"] > 0
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_checkpoints_option(bench_args, tmp_path):
    out = tmp_path / "r.json"
    args = [*bench_args, "--methods", "hf,ar", "--max-new-tokens", "24"]  # the last --methods wins
    assert main([*args, "--checkpoints", "20,5,100", "--json", str(out)]) == 0
    methods = json.loads(out.read_text())["methods"]
    assert [p["tokens"] for p in methods["ar"]["curve"]] == [5, 20]  # 100 never arrived
    assert main([*bench_args, "--checkpoints", "a,b"]) != 0


def test_checkpoints_and_arrival_times():
    assert curves.default_checkpoints(9000) == [1024, 2048, 4096, 8192, 9000]
    assert curves.default_checkpoints(8192) == [1024, 2048, 4096, 8192]
    assert curves.default_checkpoints(8000) == [1024, 2048, 4096, 8000]
    assert curves.default_checkpoints(100) == [16, 32, 64, 100]
    assert curves.default_checkpoints(5) == [5]
    times = [(3, 0.1), (7, 0.2), (8, 0.3)]
    assert curves.seconds_at(times, 4) == 0.2 and curves.seconds_at(times, 9) is None
    rows = curves.curve(times, [3, 8], hf_times=[(k, 0.1 * k) for k in range(1, 9)])
    assert rows[1] == {"tokens": 8, "seconds": 0.3, "tokens_per_s": 26.667, "speedup_vs_hf": 2.667}


def test_plot_without_hf_draws_throughput_only(tmp_path):
    import warnings

    from PIL import Image

    report = {"ar": {"timeline": [[8, 0.5], [16, 1.0]]}, "tokenswift": {"timeline": [[16, 0.5]]}}
    png = tmp_path / "rate.png"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no empty speedup panel with an empty legend
        curves.plot(report, str(png))
    assert Image.open(png).size == (600, 420)


def test_plot_without_matplotlib_says_so_before_the_run(bench_args, tmp_path, monkeypatch, capsys):
    """matplotlib comes with the `bench` extra only: without it --plot is refused in one line
    that says how to add it, before a model is loaded or a token written."""
    from swiftwriter.modelstore import loader

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    loads = []
    monkeypatch.setattr(loader, "load", lambda *a, **k: loads.append(a))
    png = tmp_path / "speed.png"
    assert main([*bench_args, "--max-new-tokens", "16", "--plot", str(png)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "swiftwriter[bench]" in err[0], err
    assert not loads and not png.exists()

"""`swiftwriter heads train|show` and `bench --heads` on a tiny random model (loader replaced,
nothing converted or downloaded): train from a text file, resume, use the drafter in the bench
beside `tokenswift-noheads`, and refuse a drafter made for another model."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from swiftwriter.cli import build_parser, main

from tests.commands.tiny_cli import IdTokenizer
from tests.conftest import build_tiny


@pytest.fixture
def tiny_cli(monkeypatch, tmp_path):
    from swiftwriter.modelstore import loader, registry
    from swiftwriter.modelstore.loader import LoadedModel
    from swiftwriter.modelstore.registry import ModelEntry

    entry = ModelEntry(id="tiny", name="tiny", source="folder", path=Path("."))
    model = build_tiny("llama", vocab=64, seed=7)
    state = {"model": model}
    monkeypatch.setattr(registry, "resolve", lambda name: entry)
    monkeypatch.setattr(
        loader,
        "load",
        lambda *a, **k: LoadedModel(entry, state["model"], IdTokenizer(), "cpu", "float32"),
    )
    rng = random.Random(3)
    phrases = [[rng.randrange(2, 64) for _ in range(6)] for _ in range(5)]
    words = [t for _ in range(120) for t in rng.choice(phrases)]
    text = tmp_path / "train.txt"
    text.write_text(" ".join(map(str, words)))
    return tmp_path, text, state


def test_train_show_resume_and_bench(tiny_cli, capsys):
    tmp_path, text, _state = tiny_cli
    out = tmp_path / "heads"
    train = ["heads", "train", "--text", str(text), "--out", str(out), "--row-length", "48"]
    small = ["--batch", "64", "--draft-vocab", "64", "--kind", "linear"]
    assert main([*train, *small, "--steps", "20"]) == 0
    printed = capsys.readouterr()
    assert "saved linear drafter" in printed.out and "training: 100%" in printed.err
    assert main(["heads", "show", str(out)]) == 0
    card = json.loads(capsys.readouterr().out)
    assert card["kind"] == "linear" and card["training"]["steps"] == 20
    assert len(card["validation"]["top1"]) == 3
    # Run again with more steps: it resumes from the checkpoint (20 steps already done).
    assert main([*train, *small, "--steps", "30"]) == 0
    card = json.loads((out / "card.json").read_text())
    assert card["training"]["steps"] == 30 and card["training"]["resumed_from_step"] == 20
    report = tmp_path / "bench.json"
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(text.read_text()[:200])
    bench = ["bench", "--prompt-file", str(prompt), "--max-new-tokens", "40", "--heads", str(out)]
    all_methods = "hf,tokenswift-noheads,tokenswift,tokenswift-fullcache"
    methods = ["--methods", all_methods, "--json", str(report)]
    assert main([*bench, *methods, "--draft-mode", "pass", "--head-tree", "2,2"]) == 0
    data = json.loads(report.read_text())
    assert data["meta"]["drafter"].startswith("present")
    assert data["meta"]["draft_mode"] == "pass" and data["meta"]["head_tree"] == [2, 2]
    for method in ("tokenswift-noheads", "tokenswift", "tokenswift-fullcache"):
        assert data["methods"][method]["identical_to_hf"] is True
    # the draft pass of -fullcache attends to the whole context, tokenswift's to a partial one
    assert main([*bench, "--methods", "tokenswift-fullcache", "--no-heads"]) == 1
    assert "heads" not in data["methods"]["tokenswift-noheads"]["accepted_by_source"]


def test_a_drafter_for_another_model_is_one_clear_line(tiny_cli, capsys):
    tmp_path, text, state = tiny_cli
    out = tmp_path / "heads"
    argv = ["heads", "train", "--text", str(text), "--out", str(out), "--row-length", "48"]
    assert main([*argv, "--steps", "2", "--batch", "16", "--draft-vocab", "32"]) == 0
    state["model"] = build_tiny("llama", vocab=64, hidden=48, seed=8)
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("3 4 5")
    capsys.readouterr()
    code = main(
        ["bench", "--prompt-file", str(prompt), "--max-new-tokens", "4", "--heads", str(out)]
    )
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "does not fit this model: hidden size 32 vs the model's 48" in err[-1]


def test_heads_train_needs_text(tiny_cli, capsys):
    assert main(["heads", "train", "--out", str(tiny_cli[0] / "x")]) == 1
    assert "Give training text" in capsys.readouterr().err


def test_a_time_budget_stops_training_and_the_same_command_goes_on(tiny_cli, capsys, monkeypatch):
    from swiftwriter.commands import heads

    tmp_path, text, _state = tiny_cli
    out = tmp_path / "heads"
    train = ["heads", "train", "--text", str(text), "--out", str(out), "--row-length", "48"]
    small = ["--batch", "64", "--draft-vocab", "64", "--kind", "linear", "--steps", "30"]
    ticks = iter(range(10**6))
    monkeypatch.setattr(heads, "clock", lambda: float(next(ticks)))  # one second per look
    assert main([*train, *small, "--hours", str(12 / 3600)]) == 3
    assert "run the same command again" in capsys.readouterr().err
    assert not (out / "card.json").exists()
    done = json.loads((out / "checkpoint" / "state.json").read_text())["step"]
    assert 0 < done < 30
    assert main([*train, *small]) == 0
    card = json.loads((out / "card.json").read_text())
    assert card["training"]["resumed_from_step"] == done and card["training"]["steps"] == 30
    assert card["training"]["penalty"] == 1.2


def test_absurd_budgets_and_penalties_are_refused(tiny_cli, capsys):
    tmp_path, text, _state = tiny_cli
    base = ["heads", "train", "--text", str(text), "--out", str(tmp_path / "h")]
    assert main([*base, "--hours", "-1"]) != 0
    assert main([*base, "--penalty", "0.5"]) != 0
    assert "--penalty" in capsys.readouterr().err


def test_heads_without_an_action_says_what_to_do_in_one_line(capsys):
    """Like a value the command refuses (cli.py's exit status): 1 and one line on stderr."""
    assert main(["heads"]) == 1
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "heads train|show" in err[0], err
    assert not captured.out


@pytest.mark.parametrize(
    ("argv", "device", "dtype"),
    [
        ([], "cpu", "float32"),  # auto on a CPU: training's exact features
        ([], "cuda", "auto"),  # auto on a GPU: the loader's measured choice, as elsewhere
        (["--dtype", "auto"], "cpu", "float32"),
        (["--dtype", "bfloat16"], "cpu", "bfloat16"),
        (["--dtype", "float16"], "cuda", "float16"),
    ],
)
def test_heads_train_dtype_is_auto_by_default(tiny_cli, monkeypatch, argv, device, dtype):
    from swiftwriter.errors import UserError
    from swiftwriter.modelstore import loader

    tmp_path, text, _state = tiny_cli
    asked = {}

    def load(entry, device, dtype, **kwargs):
        asked.update(device=device, dtype=dtype)
        raise UserError("stop here")

    monkeypatch.setattr(loader, "pick_device", lambda wanted: device)
    monkeypatch.setattr(loader, "load", load)
    train = ["heads", "train", "--text", str(text), "--out", str(tmp_path / "h"), *argv]
    assert main(train) == 1
    assert asked == {"device": device, "dtype": dtype}
    assert build_parser().parse_args(["heads", "train", "--out", "x"]).dtype == "auto"

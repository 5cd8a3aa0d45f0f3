"""`swiftwriter generate` speaks the app's vocabulary: the app's modes as --preset, Creative
unless told otherwise (as the generation panel starts), each sampler option given in place of
the preset's value, the --encoding its refusal of a non-UTF-8 file names, and a precision line
that says what is true (on a tiny random model: nothing converted or downloaded)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from swiftwriter.cli import build_parser, main
from swiftwriter.engine.decoding.settings import MODES

from tests.commands.tiny_cli import install_tiny
from tests.conftest import build_tiny

pytestmark = pytest.mark.usefixtures("one_thread")


def settings_of(*options: str):
    from swiftwriter.commands.generate import _sampling

    return _sampling(build_parser().parse_args(["generate", "--prompt-file", "p", *options]))


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    """The tiny model behind the CLI's loader, and a prompt file of its token ids."""
    model = build_tiny("llama", vocab=16, seed=3)
    install_tiny(monkeypatch, model)
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("3 7 3 7 5 9 3 7 5 11 3 7", encoding="utf-8")
    return model, ["generate", "--prompt-file", str(prompt), "--max-new-tokens", "6"]


def test_generate_starts_in_the_app_s_mode(qtbot):
    """Without --preset, generate samples as the app's panel starts: the same settings (the
    panel's seed -1 is 'random', generate's default seed too), so one default, not two."""
    from PySide6.QtGui import QAction
    from swiftwriter.ui.take_panel import PANEL_ACTIONS, TakePanel

    panel = TakePanel({name: QAction(name) for name in PANEL_ACTIONS})
    qtbot.addWidget(panel)
    assert settings_of() == panel.sampling() == MODES["creative"]


def test_a_preset_is_the_app_s_mode_and_options_given_take_its_values_place():
    assert settings_of("--preset", "precise") == MODES["precise"]
    assert settings_of("--preset", "creative", "--seed", "4") == replace(MODES["creative"], seed=4)
    mine = settings_of("--preset", "creative", "--temperature", "0.5", "--top-p", "0.9",
                       "--window", "512", "--penalty", "1.3")  # fmt: skip
    assert mine == replace(MODES["creative"], temperature=0.5, top_p=0.9, window=512, penalty=1.3)
    assert settings_of("--preset", "precise", "--dry", "0.5").dry_multiplier == 0.5


@pytest.mark.parametrize("option", ["--temperature", "--top-p", "--min-p", "--seed"])
def test_sampler_options_are_refused_with_the_greedy_preset(option, tiny, capsys):
    """Once silently ignored by greedy decoding (the old default): now one line saying why."""
    _, argv = tiny
    assert main([*argv, "--preset", "precise", option, "0.5" if "p" in option else "1"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"swiftwriter: {option} applies to sampled text, and --preset precise is " + (
        "greedy decoding"
    )


def test_the_old_sampling_spelling_runs_its_preset_and_says_the_new_one(tiny, capsys):
    _, argv = tiny
    assert main([*argv, "--preset", "precise"]) == 0
    greedy = capsys.readouterr()
    assert main([*argv, "--sampling", "greedy"]) == 0
    old = capsys.readouterr()
    assert old.out == greedy.out and greedy.out.strip()
    assert "swiftwriter: --sampling greedy is deprecated: write --preset precise" in old.err
    assert main([*argv, "--seed", "5"]) == main([*argv, "--sampling", "sample", "--seed", "5"])
    new, renamed = capsys.readouterr().out.split("\n", 1)
    assert new + "\n" == renamed  # Creative, the same draws for the same seed


def test_a_prompt_in_another_encoding_is_read_with_the_option_its_refusal_names(
    tiny, tmp_path, capsys
):
    """The refusal of a file that is not UTF-8 names --encoding cp1252: generate takes it.
    (0xA0 is a space in Windows-1252 and no UTF-8 byte on its own.)"""
    _, argv = tiny
    prompt = tmp_path / "windows.txt"
    prompt.write_bytes(b"3 7 3 7\xa05 9 3 7")
    argv = [*argv, "--preset", "precise"]
    argv[argv.index("--prompt-file") + 1] = str(prompt)
    assert main(argv) == 1
    assert "--encoding cp1252" in capsys.readouterr().err
    assert main([*argv, "--encoding", "cp1252"]) == 0
    assert capsys.readouterr().out.strip()


@pytest.mark.parametrize(
    "command", [["generate"], ["bench"], ["heads", "train", "--out", "x"], ["project", "import"]]
)
def test_every_command_that_reads_a_text_file_takes_an_encoding(command):
    args = build_parser().parse_args([*command, *(["p", "s"] if command[0] == "project" else []),
                                      "--encoding", "cp1252"])  # fmt: skip
    assert args.encoding == "cp1252"


def test_the_precision_line_says_what_auto_chose_and_how_to_stay_exact(tiny, capsys):
    """Where `auto` took the CPU's fastest kernels over exact passes (the loader's choice, not
    the dtype's doing), the line says so and names the option that keeps every pass exact."""
    from swiftwriter.engine.passes import set_exact

    model, argv = tiny
    set_exact(model, False)
    try:
        assert main(argv) == 0
    finally:
        set_exact(model, True)
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("precision")]
    assert line == (
        "precision: float32 · may differ from plain decoding (auto chose this CPU's fastest "
        "float32 kernels over exact passes; --dtype float32 keeps every pass exact)"
    )


def test_dtype_help_names_every_dtype_the_loader_takes():
    """`stored` (a GGUF's blocks, which auto may choose) is a --dtype too: the help of
    generate and bench once named only auto and the float dtypes."""
    import argparse

    from swiftwriter.commands import bench, generate

    sub = argparse.ArgumentParser().add_subparsers()
    generate.register(sub)
    bench.register(sub)
    for name in ("generate", "bench"):
        helped = sub.choices[name]._option_string_actions["--dtype"].help
        assert all(d in helped for d in ("auto", "stored", "float32", "bfloat16", "float16"))

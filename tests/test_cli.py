"""The command line: help everywhere, one clear line (never a traceback) for bad input with the
exit status that tells a user error (1) from a usage error (2), the global `--model` reaching
every command that loads a model, and the same defaults everywhere."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
from swiftwriter.cli import build_parser, main
from swiftwriter.errors import UserError

from tests.commands.tiny_cli import word_tokenizer_folder


def run_cli(*args, env=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "swiftwriter", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def subcommands():
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return sorted(action.choices)


def test_every_command_has_help():
    names = subcommands()
    assert {"generate", "models"} <= set(names)
    for name in [None, *names]:
        result = run_cli(*([name] if name else []), "--help")
        assert result.returncode == 0, result.stderr
        assert "usage:" in result.stdout


@pytest.mark.parametrize(
    "args, message, status",
    [
        (["generate", "--prompt-file", "/nonexistent/prompt.txt"], "No such file", 1),
        (["generate", "--prompt-file", __file__, "--model", "no-such-model"], "Unknown model", 1),
        (["--model", "no-such-model", "generate", "--prompt-file", __file__], "Unknown model", 1),
        (["models", "add", "mine", "/nonexistent/folder"], "does not exist", 1),
        (["generate", "--prompt-file", __file__, "--max-new-tokens", "-5"], "positive", 2),
        (["generate", "--prompt-file", __file__, "--penalty", "abc"], "not a number", 2),
        (["generate", "--prompt-file", __file__, "--no-such-option"], "unrecognized", 2),
    ],
)
def test_bad_input_is_one_clear_line(args, message, status, tmp_path):
    import os

    env = dict(os.environ, SWIFTWRITER_CONFIG_DIR=str(tmp_path))
    result = run_cli(*args, env=env)
    assert result.returncode == status
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    if status == 1:  # a user error is one line; argparse's usage errors add the usage
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_export_help_names_every_format_it_writes(capsys):
    from swiftwriter.export import FORMAT_NAMES

    with pytest.raises(SystemExit):
        main(["--help"])
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    helped = " ".join(capsys.readouterr().out.split())
    for name in FORMAT_NAMES.values():
        assert helped.count(name) >= 2, name  # the command list's line and export's own
    assert "Markdown or DOCX" not in helped


def test_the_command_line_checks_its_options_without_loading_torch():
    """The parser, the app's modes and drafting strategies and the checks of the values given
    load no torch: a refused value costs a fraction of a second, not the seconds torch takes."""
    code = (
        "import sys\n"
        "from swiftwriter.cli import build_parser\n"
        "build_parser()\n"
        "from swiftwriter.engine.decoding.settings import MODES, STRATEGIES, SamplingSettings\n"
        "from swiftwriter.modelstore import placement\n"
        "print(sorted(m for m in ('torch', 'transformers', 'PySide6') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result


def test_models_list_shows_default(tmp_path):
    import os

    env = dict(os.environ, SWIFTWRITER_CONFIG_DIR=str(tmp_path))
    result = run_cli("models", "list", env=env)
    assert result.returncode == 0
    assert "smollm2-135m-instruct" in result.stdout


@pytest.fixture
def prompt_file(tmp_path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("the sea rose and the wall fell at night the sea", encoding="utf-8")
    return str(prompt)


def test_the_global_model_loads_a_registered_user_model(tmp_path, monkeypatch, capsys, prompt_file):
    """`swiftwriter --model tiny-user generate --prompt-file P` loads that model, for real."""
    from swiftwriter.modelstore import loader, registry

    from tests.conftest import build_tiny

    monkeypatch.setenv("SWIFTWRITER_CONFIG_DIR", str(tmp_path / "config"))
    folder = tmp_path / "tiny-user"
    build_tiny("llama", vocab=16, seed=3).save_pretrained(folder)
    word_tokenizer_folder(folder)
    registry.add_user_model("tiny-user", folder)
    loaded = []
    real_load = loader.load
    monkeypatch.setattr(
        loader, "load", lambda *a, **k: loaded.append(real_load(*a, **k)) or loaded[-1]
    )
    argv = ["generate", "--prompt-file", prompt_file, "--max-new-tokens", "4", "--exact-length"]
    assert main(["--model", "tiny-user", *argv, "--dtype", "float32", "--preset", "precise"]) == 0
    (model,) = loaded
    assert model.entry.id == "tiny-user" and model.entry.path == folder.resolve()
    assert model.model.config.vocab_size == 16  # the tiny model's weights, not the default's
    assert capsys.readouterr().out.strip()


def test_the_global_model_reaches_generate(monkeypatch, capsys, prompt_file):
    """`swiftwriter --model smollm2-135m-instruct generate --prompt-file P` resolves that id
    (and without --model the default is asked for, so the test tells the two apart)."""
    from swiftwriter.modelstore import registry

    from tests.commands.tiny_cli import install_tiny
    from tests.conftest import build_tiny

    install_tiny(monkeypatch, build_tiny("llama", vocab=16, seed=3))
    asked = []
    tiny = registry.resolve(None)
    monkeypatch.setattr(registry, "resolve", lambda name: asked.append(name) or tiny)
    prompt = Path(prompt_file)
    prompt.write_text("3 7 3 7 5", encoding="utf-8")
    argv = ["generate", "--prompt-file", prompt_file, "--max-new-tokens", "3", "--exact-length"]
    assert main(["--model", "smollm2-135m-instruct", *argv]) == 0
    assert main(argv) == 0
    assert asked == ["smollm2-135m-instruct", None]


@pytest.mark.parametrize(
    "command",
    [
        ["generate", "--prompt-file", "{prompt}"],
        ["bench", "--prompt-file", "{prompt}"],
        ["heads", "train", "--out", "{tmp}/heads", "--text", "{prompt}"],
        ["models", "prepare"],
        ["models", "measure"],
    ],
)
def test_every_command_that_loads_a_model_takes_the_global_one(
    command, monkeypatch, capsys, tmp_path, prompt_file
):
    from swiftwriter.modelstore import registry

    def resolve(name):
        raise UserError(f"resolved {name}")

    monkeypatch.setattr(registry, "resolve", resolve)
    argv = [a.format(prompt=prompt_file, tmp=tmp_path) for a in command]
    assert main(["--model", "chosen", *argv]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == "swiftwriter: resolved chosen"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "a", "generate", "--prompt-file", "p", "--model", "b"], "given twice"),
        (["--model", "a", "project", "docs", "p.swiftwriter"], "loads no model"),
        (["--model", "a", "export", "p.swiftwriter", "--out", "x.md"], "loads no model"),
        (["--project", "p.swiftwriter", "project", "docs", "p.swiftwriter"], "opens a project"),
    ],
)
def test_global_options_a_command_cannot_take_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2 and message in capsys.readouterr().err


def test_the_app_opens_a_project_named_after_the_global_model(tmp_path, monkeypatch, capsys):
    from swiftwriter.ui import app

    opened = []
    monkeypatch.setattr(app, "run_app", lambda **kw: opened.append(kw) or 0)
    project = tmp_path / "Novel.swiftwriter"
    project.write_bytes(b"")
    assert main(["--model", "tiny", str(project)]) == 0
    assert main(["--project", str(project)]) == 0  # the old spelling, for scripts
    assert opened == [
        {"model": "tiny", "project": str(project)},
        {"model": None, "project": str(project)},
    ]
    err = capsys.readouterr().err
    assert err == "swiftwriter: --project PROJECT is deprecated: write swiftwriter PROJECT\n"


def subparsers(parser, prefix=()):
    """(command words, parser) for every leaf command."""
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not actions:
        yield " ".join(prefix), parser
    for action in actions:
        for name, child in action.choices.items():
            yield from subparsers(child, (*prefix, name))


def test_device_and_dtype_default_to_auto_everywhere():
    defaults = {}
    for name, parser in subparsers(build_parser()):
        for action in parser._actions:
            if action.dest in ("device", "dtype") and "--" + action.dest in action.option_strings:
                defaults[(name, action.dest)] = action.default
    assert ("generate", "device") in defaults and ("bench", "dtype") in defaults
    assert {k: v for k, v in defaults.items() if k[1] == "device"} == {
        k: "auto" for k in defaults if k[1] == "device"
    }
    # their owners' choices: models prepare's None is "what auto picks here"; heads train
    # trains in float32 on a CPU (commands/heads.py)
    own_choice = {"models prepare", "heads train"}
    dtypes = {k: v for k, v in defaults.items() if k[1] == "dtype" and k[0] not in own_choice}
    assert dtypes == {k: "auto" for k in dtypes}


def test_generate_samples_with_the_app_s_modes_unless_told_otherwise():
    """`generate` without --penalty or --dry writes with the app's Precise or Creative
    settings, as --preset says; given, they win."""
    from swiftwriter.cli import build_parser
    from swiftwriter.commands.generate import _sampling
    from swiftwriter.engine.decoding.settings import MODES

    def sampling(*extra):
        return _sampling(build_parser().parse_args(["generate", "--prompt-file", "x", *extra]))

    greedy, creative = sampling("--preset", "precise"), sampling("--preset", "creative")
    assert (greedy.penalty, greedy.dry_multiplier) == (MODES["precise"].penalty, 0.0)
    assert (creative.penalty, creative.dry_multiplier) == (
        MODES["creative"].penalty,
        MODES["creative"].dry_multiplier,
    )
    mine = sampling("--preset", "creative", "--penalty", "1.3", "--dry", "0")
    assert (mine.penalty, mine.dry_multiplier) == (1.3, 0.0)

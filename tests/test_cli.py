"""The command line: help everywhere, and one clear line (never a traceback) for bad input."""

from __future__ import annotations

import subprocess
import sys

import pytest
from swiftwriter.cli import build_parser


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
    "args, message",
    [
        (["generate", "--prompt-file", "/nonexistent/prompt.txt"], "No such file"),
        (["generate", "--prompt-file", __file__, "--model", "no-such-model"], "Unknown model"),
        (["generate", "--prompt-file", __file__, "--max-new-tokens", "-5"], "positive"),
        (["generate", "--prompt-file", __file__, "--penalty", "abc"], "not a number"),
        (["models", "add", "mine", "/nonexistent/folder"], "does not exist"),
    ],
)
def test_bad_input_is_one_clear_line(args, message, tmp_path):
    import os

    env = dict(os.environ, SWIFTWRITER_CONFIG_DIR=str(tmp_path))
    result = run_cli(*args, env=env)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_models_list_shows_default(tmp_path):
    import os

    env = dict(os.environ, SWIFTWRITER_CONFIG_DIR=str(tmp_path))
    result = run_cli("models", "list", env=env)
    assert result.returncode == 0
    assert "smollm2-135m-instruct" in result.stdout

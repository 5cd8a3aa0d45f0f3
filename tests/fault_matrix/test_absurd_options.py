"""Fault matrix row: absurd command-line values (issue 58 item 8). A temperature that is 0 in
float32, an empty prompt, an empty --model, torch's `meta` device and a drafter tree wider than
any trie were once run (writing nothing, or text from nothing), taken for the default, or ended
in an 'unexpected' line; a latin-1 prompt's refusal named an option `generate` did not have.
Each is now refused in one line saying what is wrong, within the budget of a benign run of the
same command (common.within_budget), with nothing written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.fault_matrix.common import cli_trial, within_budget

PROMPT = "the sea rose and the wall fell at night"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny model folder, prompt files, a child environment of the module's own, and one
    benign run of each command on that model (what the hostile runs are measured against)."""
    from tests.commands.tiny_cli import word_tokenizer_folder
    from tests.conftest import build_tiny

    root = tmp_path_factory.mktemp("absurd")
    folder = root / "tiny"
    build_tiny("llama", vocab=16, seed=3).save_pretrained(folder)
    word_tokenizer_folder(folder)
    (root / "prompt.txt").write_text(PROMPT, encoding="utf-8")
    (root / "empty.txt").write_text("\n \n", encoding="utf-8")
    (root / "latin1.txt").write_bytes(PROMPT.encode() + b" \x93caf\xe9\x94")
    # the session's cache stays: it holds the tree-attention kernel's build (tests/isolation.py)
    env = {**os.environ, **{f"SWIFTWRITER_{name.upper()}_DIR": str(root / name)
                            for name in ("data", "config", "log")}}  # fmt: skip
    env["SWIFTWRITER_MODELS_DIR"] = str(root / "data" / "models")
    common = ["--model", str(folder), "--max-new-tokens", "4", "--dtype", "float32"]
    benign = {
        "generate": ["generate", "--prompt-file", str(root / "prompt.txt"), *common],
        "bench": [
            "bench",
            "--prompt-file",
            str(root / "prompt.txt"),
            *common,
            "--methods",
            "ar",
            "--no-heads",
        ],  # fmt: skip
    }
    runs = {command: cli_trial(env, *argv, timeout=600) for command, argv in benign.items()}
    for command, run in runs.items():
        assert run.returncode == 0 and run.stdout.strip(), (command, run.stderr[-2000:])
    return root, env, benign, runs


def files_under(root: Path) -> set[str]:
    return {str(p) for name in ("data", "config", "log") for p in (root / name).rglob("*")}


ROWS = {
    "temperature 0 in float32": (
        "generate",
        ["--temperature", "1e-320"],
        "The temperature must be at least 0.01",
    ),
    "empty prompt": ("generate", ["--prompt-file", "{root}/empty.txt"], "empty.txt holds no text"),
    "empty model": ("generate", ["--model", ""], "--model is empty"),
    "meta device": ("generate", ["--device", "meta"], "cuda:N or mps, not 'meta'"),
    "bench on the meta device": ("bench", ["--device", "meta"], "cuda:N or mps, not 'meta'"),
    "drafter tree 100000 wide": (
        "bench",
        ["--head-tree", "100000"],
        "The drafter's tree takes 1 to 32 candidates",
    ),
    "latin-1 prompt": ("generate", ["--prompt-file", "{root}/latin1.txt"], "--encoding cp1252"),
}


@pytest.mark.parametrize("command, options, expect", ROWS.values(), ids=ROWS.keys())
def test_an_absurd_option_is_refused_in_one_line(setup, command, options, expect):
    root, env, benign, runs = setup
    argv = list(benign[command])
    for option, value in zip(options[::2], options[1::2], strict=True):
        value = value.format(root=root)
        if option in argv:
            argv[argv.index(option) + 1] = value
        else:
            argv += [option, value]
    before = files_under(root)
    hostile = cli_trial(env, *argv)
    within_budget(hostile, runs[command], expect)
    assert hostile.returncode == 1 and hostile.stdout == "", hostile
    assert files_under(root) == before  # nothing written: no file, no log
    hint = re.search(r"--encoding (\S+)", hostile.stderr)
    if hint:  # the option the refusal names is one this command takes
        from swiftwriter.cli import build_parser

        build_parser().parse_args([*argv, "--encoding", hint.group(1)])

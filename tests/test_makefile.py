"""The set-up's pip commands, as `make -n venv` prints them for a venv in a temporary folder
(nothing is installed): torch's requirement and its index are separate arguments, the CPU build
is named by default, and another torch choice installs again while the same one does not."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CUDA_INDEX = "https://download.pytorch.org/whl/cu128"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def dry_run(venv: Path, *assignments: str) -> list[list[str]]:
    """The commands `make -n venv` would run, each split as the shell would split it."""
    return [shlex.split(line) for line in printed(venv, *assignments)]


def printed(venv: Path, *assignments: str) -> list[str]:
    out = subprocess.run(
        ["make", "-s", "-n", "-C", str(ROOT), "venv", f"VENV={venv}", *assignments],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [line for line in out.splitlines() if line.strip()]


def torch_install(commands: list[list[str]]) -> list[str]:
    """The arguments after `pip ... install` of the command that installs torch."""
    found = [c for c in commands if "install" in c and any(a.startswith("torch") for a in c)]
    assert len(found) == 1, commands
    command = found[0]
    return command[command.index("install") + 1 :]


def test_a_cuda_build_gets_its_requirement_and_its_index_as_separate_arguments(tmp_path):
    args = torch_install(
        dry_run(tmp_path / "venv", "TORCH=torch==2.13.0+cu128", f"TORCH_INDEX={CUDA_INDEX}")
    )
    assert args == ["torch==2.13.0+cu128", "--extra-index-url", CUDA_INDEX]


def test_the_default_is_the_cpu_build_from_the_cpu_index(tmp_path):
    commands = dry_run(tmp_path / "venv")
    assert torch_install(commands) == ["torch==2.13.0+cpu", "--extra-index-url", CPU_INDEX]
    # the package itself comes after torch (its range is then satisfied, never a CUDA pull)
    installs = [c for c in commands if "install" in c]
    assert installs.index([c for c in installs if "-e" in c][0]) > installs.index(
        [c for c in installs if any(a.startswith("torch") for a in c)][0]
    )


def test_no_index_leaves_the_requirement_alone(tmp_path):
    assert torch_install(dry_run(tmp_path / "venv", "TORCH=torch>=2.4", "TORCH_INDEX=")) == [
        "torch>=2.4"
    ]


def test_the_venv_remembers_its_choice_and_another_installs_again(tmp_path):
    venv = tmp_path / "venv"
    lines = printed(venv, "TORCH=torch==2.13.0+cu128", f"TORCH_INDEX={CUDA_INDEX}")
    # play the recipe's last two lines (what an install leaves behind: the stamp, the choice)
    written = [line for line in lines if line.startswith("printf")]
    assert len(written) == 2
    venv.mkdir()
    for line in written:
        subprocess.run(line, shell=True, check=True)
    assert dry_run(venv) == []  # `make run` later: the same choice, nothing to do
    again = torch_install(dry_run(venv, "TORCH=torch==2.13.0+cpu", f"TORCH_INDEX={CPU_INDEX}"))
    assert again == ["torch==2.13.0+cpu", "--extra-index-url", CPU_INDEX]

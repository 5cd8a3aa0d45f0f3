"""The fault matrix's shared parts: each fault a writer's machine can throw at a project is run
for real in a child process, then the same checks: nothing committed is lost, `integrity_check`
is ok, the writer saw at most one line of error and no traceback, and the source file is
unchanged. Rows live in this package's `test_*.py` modules, one module per area."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from swiftwriter.store import Project

CLI = [sys.executable, "-m", "swiftwriter"]
BASE = "Chapter one, written and saved before anything went wrong."


def child_env(root: Path) -> dict:
    """The environment of a child whose data, config and log folders are under `root`."""
    return {
        **os.environ,
        "SWIFTWRITER_DATA_DIR": str(root / "data"),
        "SWIFTWRITER_MODELS_DIR": str(root / "data" / "models"),
        "SWIFTWRITER_CONFIG_DIR": str(root / "config"),
        "SWIFTWRITER_LOG_DIR": str(root / "logs"),
    }


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_project(path: Path, must_hold: list[str]) -> None:
    with Project.open(path) as p:
        assert p.integrity_check() == "ok"
        texts = [d.text for d in p.documents()]  # one query (document() walks each one up)
        texts += [g.text for g in p.generations()]
    for text in must_hold:
        assert any(text in t for t in texts), f"lost: {text[:60]!r}"


def one_line(result: subprocess.CompletedProcess, expect: str) -> None:
    err = result.stderr.strip()
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr and err.count("\n") == 0, err
    assert expect in err, err


def kill_when(code: str, marker: str, env, *args: str) -> list[str]:
    """Run `code` in a child, SIGKILL it once it printed `marker` twice; its output lines."""
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while sum(marker in line for line in lines) < 2 and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    return lines


# --- Bounded trials: a hostile input is refused or survived within a time and memory budget ---

BUDGET_S = 10.0  # a hostile input is dealt with within this much time ...
BUDGET_MB = 500  # ... and memory above the same command on a benign input (start-up counted once)
TIMEOUT_S = (
    120.0  # a child still running then is stopped (a benign run alone took 23 s on busy cores)
)
ADDRESS_SPACE = 6 << 30  # the child's hard ceiling, so an unbounded read fails, not the host


@dataclass(frozen=True)
class Trial:
    """One child run: what it printed, its exit status, wall seconds and peak resident memory."""

    returncode: int | None  # None: killed at the time bound
    stdout: str
    stderr: str
    seconds: float
    peak_mb: float


# The child is started by a fresh small interpreter, never forked from this test process: Linux
# counts a forked child's peak memory from its parent's resident size at the fork (and at exec),
# so a child of pytest, which holds models by then, would report pytest's memory as its own.
SPAWNER = """
import json, os, resource, sys
ceiling, report, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
pid = os.fork()
if pid == 0:
    resource.setrlimit(resource.RLIMIT_AS, (ceiling, ceiling))
    os.execvp(argv[0], argv)
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as f:
    json.dump([os.waitstatus_to_exitcode(status), usage.ru_maxrss], f)
"""


def trial(argv: list[str], env, timeout: float = TIMEOUT_S, stdin: str | None = None) -> Trial:
    """Run `argv` in a child under the address-space ceiling and a time bound; its peak RSS is
    the kernel's own accounting of that one child (wait4 in the spawner above)."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        spawner = [sys.executable, "-c", SPAWNER, str(ADDRESS_SPACE), str(report), *argv]
        start = time.monotonic()
        child = subprocess.Popen(spawner, env=env, start_new_session=True, text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)  # fmt: skip
        try:
            out, err = child.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            out, err = child.communicate()
            return Trial(None, out, err, time.monotonic() - start, float("nan"))
        seconds = time.monotonic() - start
        returncode, peak_kb = json.loads(report.read_text())
    return Trial(returncode, out, err, seconds, peak_kb / 1024)


def cli_trial(env, *args: str, timeout: float = TIMEOUT_S, stdin: str | None = None) -> Trial:
    return trial([*CLI, *args], env, timeout=timeout, stdin=stdin)


def in_budget(hostile: Trial, benign: Trial) -> None:
    """The hostile run ended on its own within BUDGET_S and BUDGET_MB of the benign run of the
    same command: the start-up both pay (imports, a model load: 6 to 23 s on two busy cores)
    is counted once."""
    assert hostile.returncode is not None, f"still running after {hostile.seconds:.0f} s"
    assert hostile.seconds <= benign.seconds + BUDGET_S, (hostile.seconds, benign.seconds)
    assert hostile.peak_mb <= benign.peak_mb + BUDGET_MB, (hostile.peak_mb, benign.peak_mb)


def within_budget(hostile: Trial, benign: Trial, expect: str | None = None) -> None:
    """In budget (`in_budget`), and one line without a traceback when it failed."""
    in_budget(hostile, benign)
    err = hostile.stderr.strip()
    assert "Traceback" not in hostile.stderr and err.count("\n") == 0, err[-2000:]
    if expect is not None:
        assert expect in err, err

"""The fault matrix's shared parts: each fault a writer's machine can throw at a project is run
for real in a child process, then the same checks: nothing committed is lost, `integrity_check`
is ok, the writer saw at most one line of error and no traceback, and the source file is
unchanged. Rows live in this package's `test_*.py` modules, one module per area."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from swiftwriter.store import Project

CLI = [sys.executable, "-m", "swiftwriter"]
BASE = "Chapter one, written and saved before anything went wrong."


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_project(path: Path, must_hold: list[str]) -> None:
    with Project.open(path) as p:
        assert p.integrity_check() == "ok"
        texts = [p.document(d.id).text for d in p.documents()]
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

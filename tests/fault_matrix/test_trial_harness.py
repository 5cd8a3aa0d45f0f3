"""The bounded trials measure what they claim: a child's own peak memory and its time, and a
child that runs past its bound is stopped and reported as such."""

from __future__ import annotations

import sys

from tests.fault_matrix.common import trial

ALLOCATE = "import sys; b = bytearray({} << 20); b[::4096] = b'x' * len(b[::4096]); print('ok')"


def test_peak_memory_is_the_childs_own(env):
    held = bytearray(400 << 20)  # this process's own memory must not count as the child's
    held[::4096] = b"x" * len(held[::4096])
    small = trial([sys.executable, "-c", ALLOCATE.format(8)], env)
    assert small.peak_mb < 100, small.peak_mb
    large = trial([sys.executable, "-c", ALLOCATE.format(300)], env)
    assert small.returncode == 0 and large.returncode == 0, (small.stderr, large.stderr)
    assert small.stdout.strip() == "ok"
    assert large.peak_mb - small.peak_mb > 280, (small.peak_mb, large.peak_mb)
    # measured after the large one: not the largest child this process ever reaped
    again = trial([sys.executable, "-c", ALLOCATE.format(8)], env)
    assert again.peak_mb < large.peak_mb - 280


def test_a_child_past_its_bound_is_stopped(env):
    hung = trial([sys.executable, "-c", "import time; time.sleep(60)"], env, timeout=1)
    assert hung.returncode is None and hung.seconds < 10

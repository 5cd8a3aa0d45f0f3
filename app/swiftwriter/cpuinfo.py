"""The CPU's feature flags as Linux lists them, read in one place: the native kernels' builds
are kept per flags line (what -march=native compiles for), and the loader and the memory
estimates ask it for AVX-512 BF16 and AMX."""

from __future__ import annotations

import contextlib
from pathlib import Path


def cpu_flags() -> str:
    """The CPU's flags line from /proc/cpuinfo ("" where there is none)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line
    return ""

"""Large freed blocks handed back to the system at once, for a process that runs a model on
stored blocks.

Why: glibc serves a freed large block's next request from the heap instead of a fresh mapping
(its mmap threshold rises with each large free, up to 32 MiB), so the temporaries of a load and
of a long prompt's prefill stay resident between the blocks the process keeps. A 1.06 GB
Q4_K_M file peaked at 2.03 GB of resident memory while loading, and a 128-token take on it at
1.77 GB; with blocks of 1 MiB or more mapped on their own, 1.53 and 1.70 GB. A pass's own buffers
are smaller than that, and their speed did not change (pass timings before and after, in one
process). Elsewhere than glibc nothing changes."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
LARGE = 1 << 20  # blocks this large or larger get their own mapping


@functools.cache  # find_library runs ldconfig in a child process: once is enough
def _glibc():
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def hand_back_large_blocks() -> bool:
    """From now on, a freed block of LARGE bytes or more leaves the process. Whether it could
    (glibc only)."""
    libc = _glibc()
    return libc is not None and bool(libc.mallopt(M_MMAP_THRESHOLD, LARGE))


def trim() -> None:
    """The heap's free pages given back (after a load: what smaller temporaries left)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)

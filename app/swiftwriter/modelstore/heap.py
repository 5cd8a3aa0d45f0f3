"""A load's large temporaries handed back to the system as soon as they are freed.

Why: glibc serves a freed large block's next request from the heap instead of a fresh mapping
(its mmap threshold rises with each large free, up to 32 MiB), so while a GGUF file's tensors
are packed one by one, the freed temporaries stay between the packed weights the process keeps:
a 1.06 GB Q4_K_M file peaked at 1.98 GB of resident memory, 1.50 GB with this. Inside
`returned_promptly`, blocks of 1 MiB or more are mapped and unmapped on their own; after it,
the threshold is glibc's largest dynamic one and the heap's free pages are trimmed. Elsewhere
than glibc it does nothing."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
DURING = 1 << 20  # blocks this large or larger get their own mapping while loading
AFTER = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: where its own rises to


def _glibc():
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


@contextmanager
def returned_promptly() -> Iterator[bool]:
    """Inside: large temporaries go back to the system when freed. Yields whether it could
    (glibc only)."""
    libc = _glibc()
    if libc is None:
        yield False
        return
    libc.mallopt(M_MMAP_THRESHOLD, DURING)
    try:
        yield True
    finally:
        libc.mallopt(M_MMAP_THRESHOLD, AFTER)
        libc.malloc_trim(0)

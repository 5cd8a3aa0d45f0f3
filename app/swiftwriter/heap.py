"""Python's full garbage collections during a take. Each one stops every thread while it walks
all tracked objects; after torch and transformers are imported that is about 380,000 of them,
150 ms a walk on a 2-core Xeon, and one came every few thousand tokens: a stall of the app's
window (the 50,000-word take's longest, 279 ms) and a pause of the engine. Objects that exist
when a take starts are frozen for it (`gc.freeze`): its collections walk only what the take
itself made (about 15,000 objects over 3,000 tokens; 10 ms). Afterwards they are unfrozen, so
the garbage of earlier takes is still collected."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_takes = 0  # takes running now: the heap is unfrozen when the last one ends


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    global _takes
    with _lock:
        _takes += 1
        gc.freeze()  # again for a later take: what the earlier ones made is frozen too
    try:
        yield
    finally:
        with _lock:
            _takes -= 1
            if _takes == 0:
                gc.unfreeze()

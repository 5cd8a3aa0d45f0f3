"""A load's temporaries go back to the system when freed (modelstore/heap.py): measured in a
child process, whose heap no other test has touched."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = r"""
import json, sys
import numpy as np
from swiftwriter.modelstore import heap

def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024

big = np.ones(16 << 17); del big  # a freed 16 MiB block: glibc's threshold rises to it
keep = []
ok = heap.hand_back_large_blocks() if sys.argv[1] == "inside" else True
before = rss_mb()
tmp = np.ones(8 << 17)  # an 8 MiB temporary, touched
keep.append(np.ones(1 << 13))  # 64 KiB that stays, allocated after it (a packed weight)
del tmp
kept = rss_mb() - before
print(json.dumps({"ok": ok, "kept": kept}))
"""


def _kept(where: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, where], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_freed_temporary_leaves_the_process_once_large_blocks_are_handed_back():
    inside = _kept("inside")
    if not inside["ok"]:  # not glibc: nothing is handed back this way
        return
    outside = _kept("outside")
    assert outside["kept"] > 6, outside  # without it the freed 8 MiB stay resident
    assert inside["kept"] < 1, inside

"""Times the tree-attention kernel alone, shaped like the default model's attention (nine query
heads over three K/V heads of 64, bfloat16, 30 layers a pass), for 1 to 16 rows after 1,000 and
8,000 cached keys: the best of five runs of ten calls, as milliseconds a pass. Run it once as it
is and once with SWIFTWRITER_NATIVE_AMX=0 to see what AMX tiles give on a CPU that has them.
Usage: .venv/bin/python resources/dev/tree_kernel_curve.py"""

from __future__ import annotations

import time

import torch
from swiftwriter.engine.passes import native

HEADS, KV_HEADS, DIM, LAYERS = 9, 3, 64, 30
ROWS = (1, 2, 4, 8, 16)


def pass_ms(fn, q, tiles, values, prefix, paths, lengths) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(10):
            fn(q, tiles, values, prefix, paths, lengths, DIM**-0.5)
        best = min(best, (time.perf_counter() - start) / 10)
    return best * 1000 * LAYERS


def main() -> None:
    fn = native.tree_attention()
    if fn is None:
        raise SystemExit(f"no kernel here: {native.unavailable()}")
    pairs = native.pair_keys(torch.bfloat16, DIM)
    gen = torch.Generator().manual_seed(0)
    print(f"kernel {native.identity()}")
    for prefix in (1000, 8000):
        keys = torch.randn(KV_HEADS, prefix + 64, DIM, generator=gen).to(torch.bfloat16)
        values = torch.randn(1, KV_HEADS, prefix + 64, DIM, generator=gen).to(torch.bfloat16)
        tiles = native.key_tiles(keys, pairs=pairs)
        cells = []
        for n in ROWS:
            q = torch.randn(n, HEADS, DIM, generator=gen).to(torch.bfloat16)
            paths = torch.arange(n, dtype=torch.int32)[:, None].repeat(1, 4)  # n siblings
            lengths = torch.ones(n, dtype=torch.int32)
            cells.append(f"{n}: {pass_ms(fn, q, tiles, values, prefix, paths, lengths):.1f} ms")
        print(f"{prefix} cached keys  " + "  ".join(cells))


if __name__ == "__main__":
    main()

"""Speed against generated length: TokenSwift's gain grows with length, so
the benchmark records when each token arrived and reports speedup and tokens/s at checkpoints
(1K, 2K, 4K, 8K... below the run's length; powers of two from 16 for short runs), plus a thin
timeline from which `plot` draws one line per method (matplotlib, imported only to plot: it
comes with the `bench` extra)."""

from __future__ import annotations

import os
import time
from bisect import bisect_left
from collections.abc import Sequence

from transformers.generation.streamers import BaseStreamer

from swiftwriter.errors import UserError


class TokenClock(BaseStreamer):
    """A `generate` streamer that notes (tokens so far, seconds since `start()`) per step; the
    first `put` is the prompt and is skipped."""

    def __init__(self):
        self.times: list[tuple[int, float]] = []
        self.t0 = time.perf_counter()
        self._prompt_seen = False
        self._count = 0

    def start(self) -> None:
        self.t0 = time.perf_counter()

    def put(self, value) -> None:
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        self._count += int(value.numel())
        self.times.append((self._count, time.perf_counter() - self.t0))

    def end(self) -> None:
        pass


def rss_mb() -> float | None:
    """This process's resident memory in MB (Linux /proc; None where there is none)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class MemoryTrace:
    """Resident memory every `every` generated tokens, so a long run shows whether it stays flat
    after warm-up: points are [tokens, MB]."""

    def __init__(self, every: int = 512):
        self.every = every
        self.points: list[list[float]] = []
        self._next = 0

    def note(self, tokens: int) -> None:
        if tokens < self._next:
            return
        mb = rss_mb()
        if mb is not None:
            self.points.append([tokens, round(mb, 1)])
        self._next = (tokens // self.every + 1) * self.every


def default_checkpoints(n: int) -> list[int]:
    """1K, 2K, 4K, ... up to n (powers of two from 16 for short runs), and n itself: an
    8,000-token run reports its end too, not only 4,096."""
    points = [c for c in (1024 << i for i in range(8)) if c <= n]
    if not points:
        points = [c for c in (16 << i for i in range(7)) if c <= n]
    if not points or points[-1] < n:
        points.append(n)
    return points


def seconds_at(times: Sequence[tuple[int, float]], k: int) -> float | None:
    """When the k-th token had arrived (the step that brought it), or None if it never did."""
    i = bisect_left([count for count, _ in times], k)
    return times[i][1] if i < len(times) else None


def curve(times, checkpoints: Sequence[int], hf_times=None) -> list[dict]:
    rows = []
    for k in checkpoints:
        s = seconds_at(times, k)
        if s is None:
            continue
        hf = seconds_at(hf_times, k) if hf_times else None
        rows.append(
            {
                "tokens": k,
                "seconds": round(s, 4),
                "tokens_per_s": round(k / s, 3) if s else None,
                "speedup_vs_hf": round(hf / s, 3) if hf and s else None,
            }
        )
    return rows


def timeline(times, points: int = 64) -> list[list[float]]:
    """At most `points` (tokens, seconds) pairs, evenly spread over the run, the last kept."""
    if len(times) <= points:
        return [[c, round(s, 4)] for c, s in times]
    step = len(times) / points
    picked = [times[int(i * step)] for i in range(points - 1)] + [times[-1]]
    return [[c, round(s, 4)] for c, s in picked]


def pyplot():
    """matplotlib's pyplot, drawing to files: it comes with the `bench` extra, not with the app
    (a UserError saying how to add it where it is missing)."""
    try:
        import matplotlib  # lazy: optional matplotlib
    except ImportError:
        raise UserError(
            "--plot draws with matplotlib, which is not installed: "
            "pip install 'swiftwriter[bench]' (or pip install matplotlib)"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: optional matplotlib

    return plt


def plot(report: dict, path: str, title: str = "") -> None:
    """Speedup over `hf` and tokens/s against generated tokens, one line per method."""
    plt = pyplot()
    hf = report.get("hf", {}).get("timeline")
    if hf:
        fig, (ax_speed, ax_rate) = plt.subplots(1, 2, figsize=(11, 4.2))
        axes = (ax_speed, ax_rate)
    else:  # no hf run: nothing to divide by, throughput alone
        fig, ax_rate = plt.subplots(1, 1, figsize=(6, 4.2))
        axes = (ax_rate,)
    for method, row in report.items():
        line = row.get("timeline") or []
        if not line:
            continue
        xs = [c for c, _ in line]
        ax_rate.plot(xs, [c / s if s else 0 for c, s in line], label=method)
        if hf:
            pairs = [(c, seconds_at(hf, c), s) for c, s in line]
            pts = [(c, h / s) for c, h, s in pairs if h and s]
            ax_speed.plot([c for c, _ in pts], [v for _, v in pts], label=method)
    if hf:
        ax_speed.set(xlabel="generated tokens", ylabel="speedup over hf (x)", title="Speedup")
    ax_rate.set(xlabel="generated tokens", ylabel="tokens / s", title="Throughput")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)

"""The marathon: a long take (20,000 or 65,000 tokens) with a sliding window, reported by
segment of 2,000 tokens as it goes, so a run of hours shows its progress and where it changes:
each segment's speed (tokens/s, tokens per pass), the window's slides in it and what they cost,
resident memory at its end, its own Distinct-1..4, the share of its 4-grams that repeat earlier
text, how often it leaves the story (engine/decoding/chatter.py), and how surprised the model is
by it (`surprise`: the mean negative log-likelihood of the segment's tokens under the plain
model, no penalty and temperature 1, given the 512 tokens before them). Distinct-n cannot tell
varied prose from word salad (both score near 1.0); surprise can: prose this model writes reads
at 2-3 nats a token, a take that has broken down into strings of unrelated tokens at 5 or more.

Slides are read from the run's statistics however the window moves: by a cache edit (`shifts`,
`shift_s`) or by re-reading the window (`reprefills`, `reprefill_s`); `slides` counts both."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from swiftwriter.bench import curves
from swiftwriter.engine.decoding import chatter, quality
from swiftwriter.errors import UserError

SEGMENT = 2000
SURPRISE_CONTEXT = 512  # tokens before each scored piece that the model reads with it


def slide_totals(stats) -> tuple[int, float]:
    """(slides so far, their seconds) from a run's statistics (RunStats or its dict)."""
    get = stats.get if isinstance(stats, dict) else lambda k, d=None: getattr(stats, k, d)
    seconds = float(get("shift_s", 0.0) or 0.0) + float(get("reprefill_s", 0.0) or 0.0)
    count = get("slides")
    if count is None:  # statistics from before cache edits: every slide re-read the window
        count = get("reprefills", 0)
    return int(count or 0), seconds


def segment_row(
    tokens: Sequence[int],
    times: Sequence[tuple[int, float]],
    slides: Sequence[tuple[int, int, float]],
    index: int,
    size: int = SEGMENT,
    decode: Callable[[list[int]], str] | None = None,
    rss_mb: float | None = None,
) -> dict:
    """Segment `index` (tokens [index * size, (index + 1) * size) of the output, the last one
    maybe shorter): `times` are (tokens so far, seconds) per step, `slides` (tokens so far,
    slides, seconds) where the window moved. A step belongs to the segment where it ends (its
    tokens, time and slides), so the segments' figures add up to the run's; the first
    segment's time includes the prefill."""
    start = index * size
    end = min(len(tokens), start + size)
    counts = [count for count, _ in times]
    (c0, t0), (c1, t1) = _upto(times, counts, start), _upto(times, counts, end)
    seconds, written = t1 - t0, c1 - c0
    passes = sum(start < count <= end for count in counts)
    moved = [(n, s) for at, n, s in slides if start < at <= end]
    own = list(tokens[start:end])
    row = {
        "segment": index,
        "start": start,
        "end": end,
        "seconds": round(seconds, 3),
        "tokens_per_s": round(written / seconds, 3) if seconds > 0 else None,
        "tokens_per_pass": round(written / passes, 3) if passes else None,
        "slides": sum(n for n, _ in moved),
        "slide_ms": round(1000 * sum(s for _, s in moved), 1),
        "rss_mb": None if rss_mb is None else round(rss_mb, 1),
    }
    row.update({f"distinct_{n}": _round(quality.distinct(own, n)) for n in range(1, 5)})
    by_window = quality.repetition_by_window(list(tokens[:end]), 4, size)
    row["repetition_4"] = _round(by_window[index]) if index < len(by_window) else None
    if decode is not None:
        row["chatter"] = chatter.measure(decode(own))
    return row


def _upto(times, counts: list[int], k: int) -> tuple[int, float]:
    """(tokens, seconds) after the last step that ended at or before the k-th token."""
    i = bisect_right(counts, k)
    return (0, 0.0) if i == 0 else times[i - 1]


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


@dataclass
class Segments:
    """Called after each turn of a run (bench/methods.py `take_turns`): makes the rows of the
    segments the run has finished since, and hands each to `emit` (the command prints it)."""

    size: int = SEGMENT
    decode: Callable[[list[int]], str] | None = None
    emit: Callable[[str, dict], None] | None = None
    rows: dict[str, list[dict]] = field(default_factory=dict)
    outputs: dict[str, list[int]] = field(default_factory=dict)

    def __call__(self, run) -> None:
        rows = self.rows.setdefault(run.name, [])
        self.outputs[run.name] = run.out
        while True:
            start = len(rows) * self.size
            if not (len(run.out) >= start + self.size or (run.done and len(run.out) > start)):
                return
            row = segment_row(
                run.out, run.times, run.slides, len(rows), self.size, self.decode, curves.rss_mb()
            )
            row["identical_to_ar"] = self._same_as_ar(run.name, row)
            rows.append(row)
            if self.emit is not None:
                self.emit(run.name, row)

    def _same_as_ar(self, name: str, row: dict) -> bool | None:
        """Whether the segment is ar's (None while ar has not written that far, or without ar)."""
        ar = self.outputs.get("ar")
        if name == "ar" or ar is None or len(ar) < row["end"]:
            return None
        return self.outputs[name][: row["end"]] == ar[: row["end"]]

    def finish(self, score: Callable[[list[int], list[int]], float] | None = None):
        """The rows, each compared with ar's text now that every run has ended, and with
        `score` (before, segment) -> nats (`surprise`), each row's surprise: scored after the
        runs, so it never lands on their clocks, and once per distinct text."""
        scored: dict[tuple, float] = {}
        for name, rows in self.rows.items():
            out = self.outputs.get(name, [])
            for row in rows:
                row["identical_to_ar"] = self._same_as_ar(name, row)
                if score is not None:
                    key = tuple(out[: row["end"]])
                    if key not in scored:
                        before = out[max(0, row["start"] - SURPRISE_CONTEXT) : row["start"]]
                        scored[key] = round(score(before, out[row["start"] : row["end"]]), 3)
                    row["surprise"] = scored[key]
        return self.rows


def surprise(model, prompt: Sequence[int], before: Sequence[int], tokens: Sequence[int],
             piece: int = 512) -> float:  # fmt: skip
    """Mean negative log-likelihood (nats per token) of `tokens` under `model`'s own plain
    distribution, each piece of `piece` tokens read after the SURPRISE_CONTEXT tokens before it
    (the end of `prompt` + `before` for the first)."""
    import torch  # lazy: torch

    if not tokens:
        return float("nan")
    text = (list(prompt) + list(before))[-SURPRISE_CONTEXT:] + list(tokens)
    first = max(1, len(text) - len(tokens))  # with nothing before it, the first is not scored
    if first >= len(text):
        return float("nan")
    device = next(model.parameters()).device
    total = 0.0
    with torch.inference_mode():
        for a in range(first, len(text), piece):
            lo = max(0, a - SURPRISE_CONTEXT)
            ids = torch.tensor([text[lo : a + piece]], device=device)
            logits = model(ids).logits[0, a - lo - 1 : -1].float()
            target = ids[0, a - lo :]
            logp = torch.log_softmax(logits, -1).gather(1, target[:, None])
            total -= float(logp.sum())
    return total / (len(text) - first)


HEADER = (
    f"{'method':12} {'segment':>13} {'tok/s':>7} {'tok/pass':>8} {'slides':>6} {'slide ms':>9} "
    f"{'RSS MB':>7} {'distinct-1/2/3/4':>19} {'rep4':>5} {'chatter':>7} {'nats':>5}  =ar"
)


def format_row(method: str, row: dict) -> str:
    """One segment as one line under HEADER."""
    d = "/".join("-" if row[f"distinct_{n}"] is None else f"{row[f'distinct_{n}']:.2f}"
                 for n in range(1, 5))  # fmt: skip
    rate = (row.get("chatter") or {}).get("rate")
    same = {None: "-", True: "yes", False: "NO"}[row.get("identical_to_ar")]
    return (
        f"{method:12} {row['start']:>6}-{row['end']:<6} {_cell(row['tokens_per_s'], '.2f'):>7} "
        f"{_cell(row['tokens_per_pass'], '.2f'):>8} {row['slides']:>6} {row['slide_ms']:>9.0f} "
        f"{_cell(row['rss_mb'], '.0f'):>7} {d:>19} {_cell(row['repetition_4'], '.2f'):>5} "
        f"{_cell(rate, '.3f'):>7} {_cell(row.get('surprise'), '.2f'):>5}  {same}"
    )


def _cell(value, spec: str) -> str:
    return "-" if value is None else f"{value:{spec}}"


def summary(rows: Sequence[dict], stats: dict | None = None) -> dict:
    """A run's segments in a few figures: slides and their share of the time, RSS when the
    window first slid against the end, the lowest Distinct-4 and the chatter over the run;
    with the run's statistics, how the window moved (cache edits, re-prefills, and why a
    shift fell back to a re-prefill)."""
    seconds = sum(r["seconds"] or 0.0 for r in rows)
    slide_s = sum(r["slide_ms"] for r in rows) / 1000
    first = next((r for r in rows if r["slides"]), None)
    words = sum((r.get("chatter") or {}).get("words", 0) for r in rows)
    chatter_words = sum((r.get("chatter") or {}).get("chatter_words", 0) for r in rows)
    d4 = [r["distinct_4"] for r in rows if r["distinct_4"] is not None]
    nats = [r["surprise"] for r in rows if r.get("surprise") is not None]
    return {
        "segments": len(rows),
        "slides": sum(r["slides"] for r in rows),
        "slide_s": round(slide_s, 3),
        "slide_share": round(slide_s / seconds, 4) if seconds else None,
        "rss_mb_first_slide": first["rss_mb"] if first else None,
        "rss_mb_end": rows[-1]["rss_mb"] if rows else None,
        "min_distinct_4": min(d4) if d4 else None,
        "chatter_rate": round(chatter_words / words, 4) if words else None,
        "max_surprise": max(nats) if nats else None,
        "first_surprise": nats[0] if nats else None,
        **{k: (stats or {}).get(k) for k in ("shifts", "reprefills", "slide_fallback")},
    }


def format_summary(method: str, s: dict) -> str:
    share = "-" if s["slide_share"] is None else f"{s['slide_share']:.1%}"
    rss = (
        f"RSS {s['rss_mb_first_slide']:.0f} MB at the first slide, {s['rss_mb_end']:.0f} at the end"
        if s["rss_mb_first_slide"] is not None and s["rss_mb_end"] is not None
        else "no slide"
    )
    how = ""
    if s.get("shifts") is not None:
        how = f" ({s['shifts']} cache edits, {s['reprefills']} re-prefills)"
    return (
        f"{method}: {s['segments']} segments, {s['slides']} slides{how} costing "
        f"{s['slide_s']:.1f} s "
        f"({share} of the run); {rss}; lowest Distinct-4 {_cell(s['min_distinct_4'], '.2f')}; "
        f"chatter {_cell(s['chatter_rate'], '.3f')} of the words; surprise "
        f"{_cell(s.get('first_surprise'), '.2f')} nats a token in the first segment, at most "
        f"{_cell(s.get('max_surprise'), '.2f')}"
    )


PANELS = (
    ("tokens_per_s", "tokens / s"),
    ("slide_ms", "slides' cost (ms)"),
    ("rss_mb", "RSS (MB)"),
    ("distinct_4", "Distinct-4"),
    ("repetition_4", "4-gram repetition"),
    ("chatter", "chatter (share of words)"),
    ("surprise", "surprise (nats / token)"),
)


def plot(rows_by_method: dict[str, list[dict]], path: str, title: str = "") -> None:
    """One panel per figure of the segments, one line per method, against generated tokens."""
    try:
        import matplotlib  # lazy: optional matplotlib
    except ImportError:
        raise UserError(
            "--plot draws with matplotlib, which is not installed: pip install 'swiftwriter[bench]'"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: optional matplotlib
    from matplotlib.ticker import FuncFormatter  # lazy: optional matplotlib

    # thousands as "10k": a 65,000-token run's full numbers ran into each other on the axis
    thousands = FuncFormatter(lambda x, _pos: f"{x / 1000:g}k" if x else "0")
    fig, axes = plt.subplots(2, 4, figsize=(16, 6.4))
    for ax, (key, label) in zip(axes.flat, PANELS, strict=False):
        for method, rows in rows_by_method.items():
            xs = [r["end"] for r in rows]
            ys = [(r.get("chatter") or {}).get("rate") if key == "chatter" else r.get(key)
                  for r in rows]  # fmt: skip
            points = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
            ax.plot([x for x, _ in points], [y for _, y in points], marker=".", label=method)
        ax.set(xlabel="generated tokens (segment end)", ylabel=label)
        ax.xaxis.set_major_formatter(thousands)
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    for ax in list(axes.flat)[len(PANELS) :]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)

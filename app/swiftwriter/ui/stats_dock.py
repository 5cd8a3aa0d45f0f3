"""Live statistics of the running generation, and a small chart of its speed.

The speedup shown is against plain decoding measured on this machine at this context length
(see writing/baseline.py), and says so; without a measurement it shows a dash, never an estimate."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QDockWidget, QFormLayout, QLabel, QVBoxLayout, QWidget

from swiftwriter.ui.fitting import WrappedLabel, scrolled

if TYPE_CHECKING:
    from swiftwriter.application import RunStats
    from swiftwriter.writing.take import LiveStats

SOURCE_NAMES = {"ngram": "n-gram", "suffix": "context", "history": "history", "heads": "heads"}


def fmt_time(seconds) -> str:
    if seconds is None:
        return "–"
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def fmt_sources(by_source: dict) -> str:
    """Accepted draft tokens per source; combined labels ('ngram+history') count for each."""
    totals: dict[str, int] = {}
    for key, count in (by_source or {}).items():
        for part in str(key).split("+"):
            name = SOURCE_NAMES.get(part, part)
            totals[name] = totals.get(name, 0) + int(count)
    if not totals:
        return "–"
    parts = [f"{name} {count:,}" for name, count in sorted(totals.items())]
    return "\n".join(" · ".join(parts[i : i + 2]) for i in range(0, len(parts), 2))


def fmt_depths(by_source_depth: dict, source: str = "heads") -> str:
    """One source's accepted drafts per draft position ('heads:1' -> count): 'd1 8 · d2 3'."""
    depths: dict[int, int] = {}
    for key, count in (by_source_depth or {}).items():
        name, _, depth = str(key).rpartition(":")
        if name == source and depth.isdigit():
            depths[int(depth)] = depths.get(int(depth), 0) + int(count)
    return " · ".join(f"d{d} {depths[d]:,}" for d in sorted(depths))


PLAIN_STEPS_TIP = (
    "Where drafting measures slower than plain decoding on this text, the engine decodes "
    "plainly and tries drafting again now and then: the text is the same either way."
)


def fmt_plain_steps(run: RunStats) -> str:
    """The share of passes that did not draft (the pace keeper found plain decoding faster)."""
    if not run.plain_steps or not run.forward_passes:
        return ""
    return f" ({run.plain_steps / run.forward_passes:.0%} of passes plain)"


def fmt_window(windowed_from) -> str:
    """Where the output became windowed (the "slide" context policy), in plain words."""
    if windowed_from is None:
        return "all of it in view"
    return f"sliding window from token {int(windowed_from):,}"


def window_sentence(windowed_from) -> str:
    if windowed_from is None:
        return ""
    return f"Exact with respect to the windowed model from token {int(windowed_from):,}."


# Why a take ended, as the status bar and the dock's summary say it.
STOP_REASONS = {
    "eos": "the model ended the text",
    "stop_string": "a stop sequence was written",
    "context_full": (
        "the model's context is full: shorten the text before the cursor, or choose Slide"
        " window in the advanced settings"
    ),
    "cancelled": "stopped",
    "broke_down": (
        "stopped where the text broke down (words that make no sense, or letters and symbols"
        " the story does not use): the model lost the thread. Undo removes the take; a"
        " shorter take or Precise mode may hold"
    ),
}


# The chart keeps at most 2 x CHART_POINTS points a line, evenly spread over the take. It gains
# ten a second, and painting walks them all in the GUI thread under the GIL: a 50,000-word
# take's hour of points made each paint cost tens of ms, ten times a second, and took the
# engine's own thread from x1.7 over plain decoding to x0.7.
CHART_POINTS = 400


class ThinSeries:
    """The points of one line: every `stride`-th point added, the stride doubling (and every
    other kept point going) whenever more than 2 x CHART_POINTS are kept, plus the newest."""

    def __init__(self):
        self.clear()

    def clear(self) -> None:
        self.kept: list[tuple[float, float]] = []
        self.stride, self.count = 1, 0
        self.newest: tuple[float, float] | None = None

    def add(self, point: tuple[float, float]) -> None:
        if self.count % self.stride == 0:
            self.kept.append(point)
            if len(self.kept) > 2 * CHART_POINTS:
                self.kept = self.kept[::2]
                self.stride *= 2
        self.count += 1
        self.newest = point

    def points(self) -> list[tuple[float, float]]:
        if self.newest is None or (self.kept and self.kept[-1] is self.newest):
            return list(self.kept)
        return [*self.kept, self.newest]


class SpeedChart(QWidget):
    """Tokens/s (solid) and the speedup over plain decoding (dashed) over the run."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setMinimumHeight(66)  # room for every row of the dock in a 640-pixel window
        self._rates = ThinSeries()  # (elapsed s, tokens/s)
        self._speedups = ThinSeries()

    @property
    def rates(self) -> list[tuple[float, float]]:
        return self._rates.points()

    @property
    def speedups(self) -> list[tuple[float, float]]:
        return self._speedups.points()

    def clear(self) -> None:
        self._rates.clear()
        self._speedups.clear()
        self.update()

    def add(self, elapsed: float, rate: float, speedup: float | None) -> None:
        self._rates.add((elapsed, rate))
        if speedup is not None:
            self._speedups.add((elapsed, speedup))
        self.update()

    def _path(self, points, box: QRectF, top: float) -> QPainterPath:
        path = QPainterPath()
        newest = self._rates.newest
        t_max = max(newest[0] if newest else 1.0, 1e-6)
        for i, (t, v) in enumerate(points):
            p = QPointF(box.left() + box.width() * t / t_max,
                        box.bottom() - box.height() * min(v / top, 1.0))  # fmt: skip
            path.moveTo(p) if i == 0 else path.lineTo(p)
        return path

    def paintEvent(self, _event) -> None:  # noqa: N802 (Qt's name)
        rates, speedups = self.rates, self.speedups
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        box = QRectF(self.rect()).adjusted(6, 14, -6, -6)
        painter.setPen(QPen(pal.mid().color(), 1))
        painter.drawRoundedRect(box, 4, 4)
        text = pal.windowText().color()
        muted = QColor(text)
        muted.setAlpha(150)
        painter.setPen(muted)
        painter.drawText(QRectF(6, 0, self.width() - 12, 14), Qt.AlignmentFlag.AlignLeft,
                         "tokens/s — speedup ┄")  # fmt: skip
        if len(rates) < 2:
            painter.end()
            return
        inner = box.adjusted(4, 4, -4, -4)
        top = max(v for _, v in rates) * 1.15 or 1.0
        painter.setPen(QPen(QColor("#4a7fb0"), 1.6))
        painter.drawPath(self._path(rates, inner, top))
        if len(speedups) >= 2:
            s_top = max(max(v for _, v in speedups) * 1.15, 1.5)
            pen = QPen(QColor("#c07a3a"), 1.4, Qt.PenStyle.DashLine)
            painter.setPen(pen)
            painter.drawPath(self._path(speedups, inner, s_top))
            one = inner.bottom() - inner.height() / s_top  # the 1x line: plain decoding
            painter.setPen(QPen(muted, 0.8, Qt.PenStyle.DotLine))
            painter.drawLine(QPointF(inner.left(), one), QPointF(inner.right(), one))
        painter.setPen(muted)
        painter.drawText(inner, Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignRight,
                         f"{rates[-1][1]:.1f} tok/s")  # fmt: skip
        painter.end()


SAMPLER_LINES = {
    "greedy": "greedy: the most likely token",
    "same-text": "same text per seed: plain decoding's text, token for token",
    "fastest": "fastest: plain decoding's distribution, another text per seed",
}
SAMPLER_TIP = (
    "How drafted words are checked while sampling. Same text per seed: a seed writes exactly "
    "the text plain decoding writes with it. Fastest: drafts are accepted by rejection "
    "sampling, more of them, so the take is faster; the text has exactly the model's "
    "distribution but is another text than plain decoding's for the same seed."
)


def fmt_precision(dtype: str, invariant: bool | None, why: str = "", sampler: str = "") -> str:
    """The dtype in use, whether the text is exactly plain decoding's (under the fastest
    sampler: its distribution), and how `auto` chose the dtype (its measurement, on a line of
    its own)."""
    kept = "distribution" if sampler == "fastest" else "text"
    exact = f"exact: plain decoding's {kept}" if invariant else "may differ from plain decoding"
    return "\n".join([f"{dtype} · {exact}", *(f"({part})" for part in why.split("; ") if part)])


THREADS_TIP = (
    "The compute threads this take runs on, measured as it runs: while another program keeps "
    "a core busy, threads that wait for each other are slower than fewer threads, so the "
    "count that measures fastest is kept and checked again as the take goes on. The text does "
    "not depend on it."
)


def precision_sentence(invariant: bool | None) -> str:
    if invariant:
        return (
            "Every verification pass computes each token as plain decoding in this precision "
            "computes it, so the text is token for token the one plain decoding writes; the "
            "speedup is measured against plain decoding in the same precision."
        )
    return (
        "Verification passes take the fastest kernels for their size (transformers' forward for "
        "this model, or a precision where equal rounding would slow plain decoding down), so a "
        "pass over several tokens rounds differently from a pass over one: the text matches "
        "plain decoding up to rounding and can leave it at a near-tie. Choose bfloat16 in "
        "Models for a text that is exactly plain decoding's."
    )


class StatsDock(QDockWidget):
    def __init__(self, parent=None):
        super().__init__("Speed", parent)
        self.setObjectName("stats_dock")
        body = QWidget()
        layout = QVBoxLayout(body)
        layout.setContentsMargins(8, 6, 8, 6)
        form = QFormLayout()
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)
        self.labels: dict[str, QLabel] = {}
        for key, title in (
            ("tokens", "Tokens"),
            ("rate", "Speed"),
            ("plain", "Plain decoding"),
            ("context", "Measured at"),
            ("speedup", "Speedup"),
            ("precision", "Precision"),
            ("sampler", "Sampler"),
            ("threads", "Threads"),
            ("tau", "Tokens per pass (τ)"),
            ("sources", "Accepted drafts"),
            ("window", "Context"),
            ("elapsed", "Elapsed"),
            ("eta", "Remaining"),
        ):
            # wrapped (the dock scrolls when they need more height than it has): a measured
            # sentence, Precision's on a busy machine, no longer widens the window
            label = WrappedLabel("–")
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.labels[key] = label
            form.addRow(title, label)
        layout.addLayout(form)
        self.chart = SpeedChart()
        layout.addWidget(self.chart)
        self.summary = WrappedLabel("")
        self.summary.setStyleSheet("color: palette(mid);")
        layout.addWidget(self.summary)
        layout.addStretch(1)
        self.setWidget(scrolled(body))
        self.last: LiveStats | None = None
        self.updates = 0

    def reset(self) -> None:
        """Back to dashes: a new take starts, or the project it measured is closed."""
        for label in self.labels.values():
            label.setText("–")
            label.setToolTip("")
        self.summary.setText("")
        self.chart.clear()
        self.last = None
        self.updates = 0

    @property
    def tokens_shown(self) -> int:
        """Tokens written so far in the last snapshot shown (0 before the first)."""
        return self.last.run.tokens if self.last is not None else 0

    def show_baseline(self, base: dict) -> None:
        self.labels["plain"].setText(f"{base['plain_tokens_per_s']:.1f} tokens/s, measured here")
        self.labels["context"].setText(f"{base['plain_context']:,} tokens of context")

    def update_stats(self, stats: LiveStats) -> None:
        self.last = stats
        self.updates += 1
        if stats.phase == "measuring":
            self.labels["plain"].setText("measuring plain decoding…")
            self.labels["tokens"].setText(f"0 / {stats.target:,}")
            return
        run = stats.run  # the engine's statistics, as the take copied them
        tokens, target, rate = run.tokens, stats.target, run.tokens_per_s
        speedup = stats.speedup_vs_plain
        shown = f"{tokens:,} / {target:,}" if target else f"{tokens:,}"
        if stats.words_target:
            shown += f"\n{stats.words:,} / {stats.words_target:,} words"
        self.labels["tokens"].setText(shown)
        self.labels["rate"].setText(f"{rate:.1f} tokens/s")
        self.labels["tau"].setText(f"{run.tau:.2f}" + fmt_plain_steps(run))
        self.labels["tau"].setToolTip(PLAIN_STEPS_TIP if run.plain_steps else "")
        sources = fmt_sources(run.accepted_by_source)
        depths = fmt_depths(run.accepted_by_source_depth)
        self.labels["sources"].setText(sources + (f"\nheads by depth: {depths}" if depths else ""))
        self.labels["window"].setText(fmt_window(run.windowed_from))
        self.labels["window"].setToolTip(window_sentence(run.windowed_from))
        self.labels["elapsed"].setText(fmt_time(stats.elapsed_s))
        self.labels["eta"].setText(fmt_time(stats.eta_s))
        if run.dtype:
            self.labels["precision"].setText(
                fmt_precision(run.dtype, run.invariant, stats.dtype_why, run.sampler)
            )
        if run.sampler:
            self.labels["sampler"].setText(SAMPLER_LINES.get(run.sampler, run.sampler))
            self.labels["sampler"].setToolTip(SAMPLER_TIP)
            self.labels["precision"].setToolTip(precision_sentence(run.invariant))
        if run.threads:
            self.labels["threads"].setText(run.threads_why or f"{run.threads}")
            self.labels["threads"].setToolTip(THREADS_TIP)
        if stats.plain_in_run and stats.plain_tokens_per_s:
            self.labels["plain"].setText(
                f"{stats.plain_tokens_per_s:.1f} tokens/s, measured in this run"
            )
            self.labels["context"].setText(f"{run.undrafted_passes:,} undrafted passes of this run")
        if speedup is not None:
            self.labels["speedup"].setText(f"×{speedup:.2f} over plain (measured)")
        elif stats.plain_tokens_per_s is None:
            self.labels["speedup"].setText("– (no plain-decoding measurement)")
        self.chart.add(stats.elapsed_s, rate, speedup)

    def show_summary(self, result: dict) -> None:
        stats = result.get("stats", {})
        speed = stats.get("speedup_vs_plain")
        parts = [
            f"Generation {result.get('generation_id')}: {result.get('status')}",
            f"{stats.get('tokens', 0):,} tokens",
            f"{stats.get('tokens_per_s', 0):.1f} tok/s",
            f"τ {stats.get('tau', 0):.2f}",
        ]
        if speed:
            parts.append(f"×{speed:.2f} vs plain (measured)")
        text = " · ".join(parts)
        why = STOP_REASONS.get(stats.get("stop_reason", ""), "")
        if why:  # the status bar's line is cut short in a narrow window: said in full here
            text += f". {why[0].upper()}{why[1:]}"
        windowed = window_sentence(stats.get("windowed_from"))
        self.summary.setText(f"{text}. {windowed}" if windowed else text)

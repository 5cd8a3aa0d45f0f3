"""The Speed dock's chart over a long take: it gains ten points a second, and painting walks
them in the GUI thread, so it keeps a bounded, evenly thinned series (an hour-long take's
unbounded one slowed the engine's own thread from x1.7 to x0.7 over plain decoding)."""

from __future__ import annotations

from PySide6.QtGui import QPixmap
from swiftwriter.ui.stats_dock import CHART_POINTS, SpeedChart, ThinSeries


def test_an_hour_of_points_is_thinned_evenly_and_keeps_the_whole_run(qtbot):
    chart = SpeedChart()
    qtbot.addWidget(chart)
    chart.resize(480, 80)
    steps = 36_000  # an hour of live snapshots, ten a second
    for i in range(steps):
        t = i / 10
        chart.add(t, 20.0 + (i % 7), 1.5 if i % 3 else None)
    for series in (chart.rates, chart.speedups):
        assert CHART_POINTS <= len(series) <= 2 * CHART_POINTS
        times = [t for t, _ in series]
        assert times == sorted(set(times))  # in order, none twice
        assert times[0] == 0.0 or times[0] < 1.0  # from the take's start ...
        assert times[-1] >= (steps - 3) / 10  # ... to its newest point
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        assert max(gaps[:-1]) <= 2 * min(gaps[:-1])  # evenly spread over the run
    pixmap = QPixmap(chart.size())
    chart.render(pixmap)  # and it paints


def test_a_short_series_keeps_every_point_and_the_newest_is_always_drawn():
    series = ThinSeries()
    for i in range(5):
        series.add((float(i), 1.0))
    assert series.points() == [(float(i), 1.0) for i in range(5)]
    for i in range(5, 10 * CHART_POINTS + 3):  # strides grow past 1: the newest still shows
        series.add((float(i), 1.0))
    assert series.points()[-1] == (float(10 * CHART_POINTS + 2), 1.0)
    assert series.points()[0] == (0.0, 1.0)
    series.clear()
    assert series.points() == []

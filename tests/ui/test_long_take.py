"""A 20,000-token take streams into the editor without stalling the GUI thread (the longest gap
between two ticks of a 5 ms timer stays under 100 ms) and without growing memory, fed by a fast
stand-in for the engine (so the test measures the app, not the model)."""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer
from swiftwriter.engine.decoding.generator import Generator, StepEvent
from swiftwriter.engine.decoding.stats import RunStats, StepStats

TOKENS = 20_000


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 2**20


def fast_generate(self, prompt_ids, max_new_tokens, should_stop=None, stop_on_text=None,
                  seed=None, pinned_ids=(), min_new_tokens=0):  # fmt: skip
    stats = self.stats = RunStats(prompt_tokens=len(prompt_ids))
    produced = 0
    while True:
        if should_stop is not None and should_stop():
            stats.stop_reason = "cancelled"
            yield StepEvent([], StepStats(0, 0, 0, {}, [], 0, 0, 0), stats, True, "cancelled")
            return
        tokens = [2 + (produced + i) % 250 for i in range(8)]
        produced += len(tokens)
        step = StepStats(8, 7, 7, {"ngram": 7}, [1] * 7, 0.0, 0.0, 0.0)
        stats.add(step)
        done = produced >= max_new_tokens
        stats.stop_reason = "length" if done else ""
        yield StepEvent(tokens, step, stats, done, stats.stop_reason)
        if done:
            return
        time.sleep(0.0004)  # a step of a very fast engine


def test_a_20000_token_take_keeps_the_gui_responsive_and_memory_flat(
    qtbot, window, make_project, monkeypatch
):
    monkeypatch.setattr(Generator, "generate", fast_generate)
    assert window.projects.open_project(make_project())
    window.panel.set_target(TOKENS, "tokens")
    window.panel.keep_writing.setChecked(False)
    window.takes.measure_baseline = False
    gaps: list[float] = []
    last = [time.perf_counter()]
    memory: dict[str, float] = {}

    def tick():
        now = time.perf_counter()
        gaps.append(now - last[0])
        last[0] = now
        done = window.stats_dock.tokens_shown
        if done >= TOKENS // 2 and "half" not in memory:
            memory["half"] = rss_mb()

    timer = QTimer()
    timer.setInterval(5)
    timer.timeout.connect(tick)
    timer.start()
    start = time.perf_counter()
    with qtbot.waitSignal(window.takes.finished, timeout=240_000) as blocker:
        window.actions_by_name["generate"].trigger()
    qtbot.waitUntil(lambda: not window.takes.busy, timeout=60_000)
    timer.stop()
    memory["end"] = rss_mb()
    elapsed = time.perf_counter() - start
    result = blocker.args[0]
    assert result["stats"]["tokens"] >= TOKENS
    longest = max(gaps[1:])
    print(f"\n20,000-token take: {elapsed:.1f} s, longest GUI stall {longest * 1000:.0f} ms, "
          f"RSS {memory.get('half', 0):.0f} MB at half, {memory['end']:.0f} MB at the end")  # fmt: skip
    assert longest < 0.100
    assert memory["end"] - memory["half"] < 64
    assert len(window.editor.toPlainText()) > TOKENS

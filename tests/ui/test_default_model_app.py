"""Acceptance: the speedup the app shows for the default model agrees with `swiftwriter bench`
(within 15%) for the same prompt, length and settings. Slow: it generates 1,000 tokens three
times (app, plain and TokenSwift in the bench). SWIFTWRITER_APP_BENCH_TOKENS changes the length.

A timed comparison, so it is a benchmark, not part of the default test run (timings on a shared
2-core machine are noisy): run it with `make test PYTEST_ARGS="-m bench"` on a quiet machine."""

from __future__ import annotations

import os

import pytest
from swiftwriter import paths


@pytest.mark.bench
@pytest.mark.default_model
def test_app_speedup_agrees_with_bench(qtbot, default_model, tmp_path):
    from swiftwriter.bench.methods import run_bench
    from swiftwriter.store import Project
    from swiftwriter.ui.main_window import MainWindow
    from swiftwriter.writing import baseline

    n = int(os.environ.get("SWIFTWRITER_APP_BENCH_TOKENS", "1000"))
    text = (paths.resources_dir() / "prompts" / "harbour.txt").read_text(encoding="utf-8")
    path = tmp_path / "Bench.swiftwriter"
    with Project.create(path, title="Bench") as proj:
        proj.add_document("Chapter 1", text.strip())
    window = MainWindow(load_model=False)
    qtbot.addWidget(window)
    window.ask = lambda title, text: True
    window.models.set_model(default_model)
    assert window.projects.open_project(path)
    window.panel.history.setChecked(False)  # the bench has no project history either
    window.panel.preset.setCurrentText("Balanced")
    window.panel.set_target(n, "tokens")
    baseline.clear_cache()
    with qtbot.waitSignal(window.takes.finished, timeout=600_000) as blocker:
        window.takes.generate()
    qtbot.waitUntil(lambda: not window.takes.busy, timeout=60_000)
    stats = blocker.args[0]["stats"]
    app_speedup = stats["speedup_vs_plain"]
    assert stats["plain_measured"] and app_speedup > 0

    tokenizer = default_model.tokenizer
    prompt = tokenizer.encode(text.strip(), add_special_tokens=False)
    assert len(prompt) == stats["prompt_tokens"]
    report = run_bench(default_model.model, prompt, stats["tokens"], window.panel.sampling(),
                       methods=("ar", "tokenswift"), drafting=window.panel.drafting())  # fmt: skip
    bench_speedup = report["ar"]["seconds"] / report["tokenswift"]["seconds"]
    print(f"app x{app_speedup:.2f}, bench x{bench_speedup:.2f} ({stats['tokens']} tokens)")
    assert abs(app_speedup - bench_speedup) <= 0.15 * bench_speedup
    window.projects.close_project()

"""Generation in the app: tokens stream into the editor while the window keeps working, Stop
ends it midway, Undo generation and Ctrl+Z take it back in one step, Regenerate keeps the
previous take, the speed dock shows live numbers against a measured plain baseline, and an
error in the worker becomes a message."""

from __future__ import annotations

from collections import Counter

from PySide6.QtCore import Qt
from swiftwriter.words import count_words
from swiftwriter.writing.endings import allowance_for

WAIT = 30000


def open_doc(window, make_project, text="The sea was grey and the wall was old."):
    path = make_project(docs=(("Chapter 1", text),))
    assert window.projects.open_project(path)
    assert window.doc_id is not None
    return window.project.document(window.doc_id)


def generate(qtbot, window, action="generate"):
    with qtbot.waitSignal(window.takes.finished, timeout=WAIT) as blocker:
        window.actions_by_name[action].trigger()
    qtbot.waitUntil(lambda: not window.takes.busy, timeout=WAIT)
    return blocker.args[0]


def test_tokens_stream_into_the_editor_at_the_cursor(qtbot, window, make_project):
    doc = open_doc(window, make_project)
    cursor = window.editor.textCursor()
    cursor.setPosition(len("The sea was grey"))  # the middle of the text
    window.editor.setTextCursor(cursor)
    window.panel.set_target(60, "tokens")
    seen: list[tuple[int, bool]] = []
    window.editor.textChanged.connect(
        lambda: seen.append((len(window.editor.toPlainText()), window.takes.busy))
    )
    result = generate(qtbot, window)
    text = window.editor.toPlainText()
    streamed = [n for n, busy in seen if busy]
    assert len(set(streamed)) >= 2, "the text should arrive in pieces while the worker runs"
    assert result["status"] == "finished"
    assert 60 <= result["stats"]["tokens"] <= 60 + allowance_for(60)  # on to a sentence end
    assert text == "The sea was grey" + result["text"] + " and the wall was old."
    # the store holds what the editor shows, and the generation is recorded
    assert window.project.document(doc.id).text == text
    gen = window.project.generation(result["generation_id"])
    assert gen.status == "finished" and gen.text == result["text"]
    # the new text is marked as generated until the writer edits it
    ((start, end),) = window.editor.generated_ranges()
    assert text[start:end] == result["text"]
    edit = window.editor.textCursor()
    edit.setPosition(start + 3)
    edit.insertText("X")
    qtbot.waitUntil(lambda: window.editor.generated_ranges() == [])


def test_the_window_stays_responsive_while_generating(qtbot, window, make_project):
    open_doc(window, make_project)
    window.panel.set_target(150, "tokens")
    window.actions_by_name["generate"].trigger()
    qtbot.waitUntil(lambda: window.stats_dock.tokens_shown > 0, timeout=WAIT)
    window.notes.add_note("Typed meanwhile", "written during a generation")  # the GUI answers
    assert window.takes.busy
    qtbot.waitUntil(lambda: not window.takes.busy, timeout=WAIT)
    assert any(n.title == "Typed meanwhile" for n in window.project.notes())


def test_stop_midway_keeps_the_text_so_far(qtbot, window, make_project):
    doc = open_doc(window, make_project)
    window.panel.set_target(3000, "tokens")
    window.takes.measure_baseline = False
    window.actions_by_name["generate"].trigger()
    qtbot.waitUntil(lambda: window.stats_dock.tokens_shown >= 20, timeout=WAIT)
    with qtbot.waitSignal(window.takes.finished, timeout=WAIT) as blocker:
        qtbot.keyClick(window.editor, Qt.Key.Key_Escape)  # Stop is Esc
    qtbot.waitUntil(lambda: not window.takes.busy, timeout=WAIT)
    result = blocker.args[0]
    assert result["status"] == "cancelled"
    assert 20 <= result["stats"]["tokens"] < 3000
    assert window.project.document(doc.id).text == doc.text + result["text"]
    assert window.editor.toPlainText() == doc.text + result["text"]
    assert "(stopped)" in window.statusBar().currentMessage()


def test_context_full_is_explained(qtbot, window, make_project):
    from tests.ui.conftest import tiny_loaded

    window.models.set_model(tiny_loaded(max_positions=64))  # a tiny context window
    open_doc(window, make_project)
    window.takes.measure_baseline = False
    window.panel.set_target(5000, "tokens")
    result = generate(qtbot, window)
    assert result["stats"]["stop_reason"] == "context_full"
    assert "context is full" in window.statusBar().currentMessage()


def test_undo_generation_is_one_step(qtbot, window, make_project):
    doc = open_doc(window, make_project)
    generate(qtbot, window)
    assert window.editor.toPlainText() != doc.text
    window.editor.undo()  # plain Ctrl+Z: the whole streamed take in one step
    assert window.editor.toPlainText() == doc.text
    window.editor.redo()
    assert window.editor.toPlainText() != doc.text
    window.actions_by_name["undo"].trigger()  # Undo generation, even after other edits
    assert window.editor.toPlainText() == doc.text
    assert window.project.document(doc.id).text == doc.text
    assert len(window.project.generations(doc.id)) == 1  # the take stays in the history


def test_regenerate_keeps_the_previous_take(qtbot, window, make_project):
    doc = open_doc(window, make_project)
    window.panel.creative.setChecked(True)  # sampling: each take differs
    first = generate(qtbot, window)
    second = generate(qtbot, window, "regenerate")
    assert first["text"] != second["text"]
    assert window.editor.toPlainText() == doc.text + second["text"]
    gens = window.project.generations(doc.id)
    assert [g.text for g in gens] == [first["text"], second["text"]]
    assert window.panel.takes.count() == 2 and window.panel.takes.isEnabled()
    window.panel.take_chosen.emit(0)  # put the first take back
    assert window.editor.toPlainText() == doc.text + first["text"]
    assert window.project.document(doc.id).text == doc.text + first["text"]


def test_the_stats_dock_updates_with_a_measured_speedup(qtbot, window, make_project):
    from swiftwriter.writing import baseline

    baseline.clear_cache()  # measured for this run, at this context
    open_doc(window, make_project)
    window.panel.set_target(80, "tokens")
    updates: list = []
    window.takes.started.connect(
        lambda: window.takes.worker.stats.connect(lambda s: updates.append(s))
    )
    result = generate(qtbot, window)
    live = [u for u in updates if u.phase == "generating"]
    assert live and updates[-1].phase == "done"
    labels = window.stats_dock.labels
    assert labels["tokens"].text() == f"{result['stats']['tokens']} / 80"
    assert "tokens/s" in labels["rate"].text()
    # the measurement before the run, or the run's own undrafted passes where most were
    stored = stats_of(window, result)
    in_run = baseline.plain_rate(stored)[1]
    assert ("measured in this run" if in_run else "measured here") in labels["plain"].text()
    assert f"{baseline.plain_rate(stored)[0]:.1f} tokens/s" in labels["plain"].text()
    assert "(measured)" in labels["speedup"].text() and "×" in labels["speedup"].text()
    # the dtype in use, and that the text is plain decoding's (the tiny model: float32, lean)
    assert labels["precision"].text() == "float32 · exact: plain decoding's text"
    assert "same precision" in labels["precision"].toolTip()
    assert window.stats_dock.chart.rates
    assert stats_of(window, result)["invariant"] is True
    stats = window.project.generation(result["generation_id"]).stats
    assert stats["plain_measured"] and stats["plain_tokens_per_s"] > 0
    assert stats["plain_context"] == stats["prompt_tokens"] + 80 // 2  # the take's middle
    again = generate(qtbot, window)  # the same context bucket reuses the measurement
    stats2 = window.project.generation(again["generation_id"]).stats
    assert stats2["plain_tokens_per_s"] == stats["plain_tokens_per_s"]
    assert stats2["plain_context"] // baseline.BUCKET == stats2["prompt_tokens"] // baseline.BUCKET
    assert "Generation" in window.stats_dock.summary.text()


def stats_of(window, result):
    return window.project.generation(result["generation_id"]).stats


def test_the_precision_row_says_when_the_text_may_differ():
    from swiftwriter.ui.stats_dock import fmt_precision, precision_sentence

    assert fmt_precision("bfloat16", False) == "bfloat16 · may differ from plain decoding"
    assert "near-tie" in precision_sentence(False)


def test_words_are_converted_with_the_measured_ratio(qtbot, window, make_project):
    open_doc(window, make_project, " ".join(["the old sea wall"] * 20))
    window.panel.set_target(30, "words")
    result = generate(qtbot, window)
    assert result["target"] == 30  # the word tokenizer has one token per word
    # the take's own text spends more (its punctuation): it runs on until 30 words are written
    assert 30 <= result["stats"]["tokens"] <= 30 + 30 // 2
    assert result["stats"]["stop_reason"] == "length" and count_words(result["text"]) >= 30


def test_an_error_in_the_worker_is_a_message(qtbot, window, make_project, monkeypatch):
    from swiftwriter.writing.session import DocumentSession

    doc = open_doc(window, make_project)

    def broken(self, **kwargs):
        raise RuntimeError("the model caught fire")

    monkeypatch.setattr(DocumentSession, "run", broken)
    with qtbot.waitSignal(window.takes.failed, timeout=WAIT):
        window.actions_by_name["generate"].trigger()
    qtbot.waitUntil(lambda: not window.takes.busy, timeout=WAIT)
    assert "the model caught fire" in window.last_error
    assert window.editor.toPlainText() == doc.text
    monkeypatch.undo()
    generate(qtbot, window)  # and the app goes on working


def test_the_plain_baseline_is_measured_per_model_and_context(tiny_words, monkeypatch):
    from swiftwriter.engine.decoding.settings import SamplingSettings
    from swiftwriter.writing import baseline

    from tests.ui.conftest import tiny_loaded

    baseline.clear_cache()
    sampling = SamplingSettings()
    short = baseline.measure_plain(tiny_words.model, list(range(2, 40)), sampling)
    assert short.context == 38 and short.steps == baseline.STEPS - 1 and short.tokens_per_s > 0
    assert baseline.measure_plain(tiny_words.model, list(range(2, 60)), sampling) is short
    longer = baseline.measure_plain(tiny_words.model, [5] * 300, sampling)  # another bucket
    assert longer is not short and longer.context == 300
    other = tiny_loaded(seed=9).model  # another model never reuses this one's numbers
    assert baseline.measure_plain(other, list(range(2, 40)), sampling) is not short
    stopped = baseline.measure_plain(other, [7] * 300, sampling, should_stop=lambda: True)
    assert stopped is None
    monkeypatch.setattr(baseline.time, "time", lambda: short.measured_at + baseline.MAX_AGE_S)
    assert baseline.measure_plain(tiny_words.model, list(range(2, 40)), sampling) is not short


def test_text_with_emoji_before_the_cursor(qtbot, window, make_project):
    from swiftwriter.ui.editor import qt_len

    doc = open_doc(window, make_project, "The 🌊 sea. The end.")
    cursor = window.editor.textCursor()
    cursor.setPosition(qt_len("The 🌊 sea."))  # Qt counts the emoji as two positions
    window.editor.setTextCursor(cursor)
    window.takes.measure_baseline = False
    window.panel.set_target(12, "tokens")
    result = generate(qtbot, window)
    assert window.editor.toPlainText() == "The 🌊 sea." + result["text"] + " The end."
    assert window.editor.span_text(window.takes.span) == result["text"]
    window.editor.append_stream("never: the stream is closed")
    window.editor.undo()
    window.editor.redo()  # the span collapses; Undo generation finds the take again
    assert window.takes.undo_generation()
    assert window.editor.toPlainText() == doc.text


def test_the_editor_span_counts_in_qt_positions(qtbot):
    from swiftwriter.ui.editor import Editor, text_before

    editor = Editor()
    qtbot.addWidget(editor)
    editor.set_text("x🌊y")
    span = editor.begin_stream(3)  # after the emoji: x, two halves of 🌊
    editor.append_stream("a😀b")
    editor.append_stream("c")
    assert editor.toPlainText() == "x🌊a😀bcy"
    assert editor.span_text(editor.end_stream()) == "a😀bc"
    assert editor.span_text(span) == "a😀bc"
    assert text_before("x🌊y", 3) == "x🌊"


def test_the_speedup_is_wall_clock_like_the_bench():
    import pytest
    from swiftwriter.writing.baseline import speedup_over_plain, stats_speedup

    # plain: 1 s prefill + 100 tokens at 25 tokens/s = 5 s; this run: 1 s + 2 s = 3 s
    assert speedup_over_plain(100, 1.0, 2.0, 25.0) == pytest.approx(5 / 3)
    assert speedup_over_plain(100, 1.0, 2.0, None) is None
    assert speedup_over_plain(0, 1.0, 2.0, 25.0) is None
    stats = {"tokens": 100, "prefill_s": 1.0, "draft_s": 0.5, "verify_s": 1.0,
             "overhead_s": 0.5, "plain_tokens_per_s": 25.0}  # fmt: skip
    assert stats_speedup(stats) == pytest.approx(5 / 3)


def test_a_run_mostly_undrafted_is_its_own_plain_measurement():
    import pytest
    from swiftwriter.writing.baseline import plain_rate, stats_speedup

    # 100 passes; 60 undrafted wrote 60 tokens in 3 s: plain decoding at 20 tokens/s here
    stats = {"tokens": 110, "forward_passes": 100, "prefill_s": 1.0, "draft_s": 0.5,
             "verify_s": 4.0, "overhead_s": 0.5, "plain_tokens_per_s": 25.0,
             "undrafted_passes": 60, "undrafted_tokens": 60, "undrafted_s": 3.0}  # fmt: skip
    assert plain_rate(stats) == (pytest.approx(20.0), True)
    assert stats_speedup(stats) == pytest.approx((1.0 + 110 / 20) / 6.0)
    # where drafts paid, the few undrafted passes are not enough: the measurement before it
    few = {**stats, "undrafted_passes": 30, "undrafted_tokens": 30, "undrafted_s": 1.5}
    assert plain_rate(few) == (25.0, False)
    assert stats_speedup(few) == pytest.approx((1.0 + 110 / 25) / 6.0)
    short = {**stats, "forward_passes": 30, "undrafted_passes": 20, "undrafted_tokens": 20}
    assert plain_rate(short)[1] is False  # under IN_RUN_PASSES: too few to time
    assert plain_rate({**few, "plain_tokens_per_s": None}) == (None, False)


def test_the_slide_policy_writes_past_the_context_and_the_dock_says_so(qtbot, window, make_project):
    from tests.ui.conftest import tiny_loaded

    window.models.set_model(tiny_loaded(max_positions=64))
    open_doc(window, make_project)
    window.takes.measure_baseline = False
    assert window.panel.context().policy == "stop"  # the default
    window.panel.context_policy.setCurrentText("Slide window")
    assert window.panel.context().policy == "slide"
    window.panel.set_target(120, "tokens")
    result = generate(qtbot, window)
    stats = result["stats"]
    assert 120 <= stats["tokens"] <= 120 + allowance_for(120) and stats["stop_reason"] == "length"
    windowed = stats["windowed_from"]
    assert windowed is not None and 0 < windowed < 120
    generation = window.project.generation(result["generation_id"])
    assert generation.settings["context"]["policy"] == "slide"
    dock = window.stats_dock
    assert dock.labels["window"].text() == f"sliding window from token {windowed:,}"
    assert f"Exact with respect to the windowed model from token {windowed:,}." in (
        dock.summary.text()
    )


def test_the_stats_dock_shows_what_the_heads_drafted(qtbot):
    from swiftwriter.engine.decoding.stats import RunStats
    from swiftwriter.ui.stats_dock import StatsDock
    from swiftwriter.writing.take import LiveStats

    dock = StatsDock()
    qtbot.addWidget(dock)
    dock.update_stats(
        LiveStats(
            "generating",
            target=60,
            run=RunStats(
                tokens=30,
                prefill_s=2.5,  # 12 tokens/s
                accepted_by_source=Counter(
                    {"heads": 9, "ngram": 3, "heads+history": 2, "suffix": 1}
                ),  # fmt: skip
                accepted_by_source_depth=Counter(
                    {"heads:1": 6, "heads:2": 4, "heads:3": 1, "ngram:1": 3}
                ),  # fmt: skip
                windowed_from=None,
            ),
        )
    )
    text = dock.labels["sources"].text()
    assert "heads 11" in text and "n-gram 3" in text and "history 2" in text
    assert "context 1" in text
    assert text.splitlines()[-1] == "heads by depth: d1 6 · d2 4 · d3 1"
    assert dock.labels["window"].text() == "all of it in view"
    dock.show_summary({"generation_id": 3, "status": "finished", "stats": {"tokens": 60}})
    assert "windowed" not in dock.summary.text()


def test_the_stats_dock_says_when_passes_decoded_plainly(qtbot):
    from swiftwriter.engine.decoding.stats import RunStats
    from swiftwriter.ui.stats_dock import StatsDock
    from swiftwriter.writing.take import LiveStats

    dock = StatsDock()
    qtbot.addWidget(dock)
    dock.update_stats(LiveStats("generating", 60, run=RunStats(tokens=30, forward_passes=28)))
    assert dock.labels["tau"].text() == "1.07"
    dock.update_stats(
        LiveStats("generating", 60, run=RunStats(tokens=40, plain_steps=12, forward_passes=38))
    )
    assert dock.labels["tau"].text() == "1.05 (32% of passes plain)"
    assert "decodes plainly" in dock.labels["tau"].toolTip()
    dock.update_stats(
        LiveStats("generating", 60, run=RunStats(tokens=50, forward_passes=50, undrafted_passes=48),
                  plain_tokens_per_s=24.5, plain_in_run=True, speedup_vs_plain=1.01)
    )  # fmt: skip
    assert dock.labels["plain"].text() == "24.5 tokens/s, measured in this run"
    assert dock.labels["context"].text() == "48 undrafted passes of this run"
    assert dock.labels["speedup"].text() == "×1.01 over plain (measured)"
    dock.update_stats(LiveStats("generating", 900, run=RunStats(tokens=70), words=41,
                                words_target=600))  # fmt: skip
    assert dock.labels["tokens"].text() == "70 / 900\n41 / 600 words"  # a length asked in words
    ended = {"stop_reason": "broke_down", "tokens": 55_855, "tokens_per_s": 22.3, "tau": 1.56}
    dock.show_summary({"generation_id": 1, "status": "finished", "stats": ended})
    summary = dock.summary.text()  # said in full: the status bar cuts its line short
    assert "Stopped where the text broke down" in summary and "Undo removes the take" in summary


def test_the_speed_dock_forgets_the_last_take_with_its_project(qtbot, window, make_project):
    """Closed and reopened, a project showed the last take's figures as if they were new
    (issue 63): they belong to the take, and go with the project."""
    open_doc(window, make_project)
    path = window.project.path
    window.takes.measure_baseline = False
    generate(qtbot, window)
    dock = window.stats_dock
    assert dock.labels["tokens"].text() != "–" and dock.summary.text() and dock.chart.rates
    window.projects.close_project()
    assert window.projects.open_project(path)
    assert {label.text() for label in dock.labels.values()} == {"–"}
    assert dock.summary.text() == "" and dock.chart.rates == []


def test_the_panel_offers_both_samplers_and_the_dock_says_which_runs(qtbot):
    """Creative's sampler is the writer's choice (Precise has none to make), it reaches the
    take's drafting settings, and the Speed dock says which one ran and what it keeps."""
    from PySide6.QtGui import QAction
    from swiftwriter.engine.decoding.settings import DEFAULT_SAMPLER
    from swiftwriter.engine.decoding.stats import RunStats
    from swiftwriter.ui.stats_dock import StatsDock
    from swiftwriter.ui.take_panel import PANEL_ACTIONS, SAMPLER_LABELS, TakePanel
    from swiftwriter.writing.take import LiveStats

    panel = TakePanel({name: QAction(name) for name in PANEL_ACTIONS})
    qtbot.addWidget(panel)
    assert panel.drafting().sampler == DEFAULT_SAMPLER
    panel.sampler.setCurrentText("Fastest")
    assert panel.drafting().sampler == "fastest" and set(SAMPLER_LABELS.values()) == {
        "fastest",
        "same-text",
    }
    panel.precise.setChecked(True)
    assert not panel.sampler.isEnabled()
    panel.creative.setChecked(True)
    assert panel.sampler.isEnabled()

    dock = StatsDock()
    qtbot.addWidget(dock)
    for sampler, line, kept in (
        ("fastest", "fastest: plain decoding's distribution", "distribution"),
        ("same-text", "same text per seed", "text"),
    ):
        dock.update_stats(
            LiveStats("generating", 60, run=RunStats(tokens=30, dtype="bfloat16", invariant=True,
                                                    sampler=sampler))
        )  # fmt: skip
        assert dock.labels["sampler"].text().startswith(line)
        assert f"exact: plain decoding's {kept}" in dock.labels["precision"].text()


def test_write_three_takes_fills_the_takes_box_in_one_go(qtbot, window, make_project):
    """Three takes written together: the first in the text, all three stored, the others one
    choice away in the takes box; each is the take its seed writes alone (engine tests)."""
    doc = open_doc(window, make_project)
    window.panel.creative.setChecked(True)
    result = generate(qtbot, window, "three_takes")
    gens = window.project.generations(doc.id)
    assert len(gens) == 3 and all(g.status == "finished" for g in gens)
    assert [g.id for g in gens[1:]] == [o["generation_id"] for o in result["others"]]
    assert len({g.text for g in gens}) == 3, "each take with its own seed"
    assert window.editor.toPlainText() == doc.text + result["text"]
    assert window.project.document(doc.id).text == doc.text + result["text"]
    assert window.panel.takes.count() == 3 and window.panel.takes.currentIndex() == 0
    window.panel.take_chosen.emit(2)
    assert window.editor.toPlainText() == doc.text + gens[2].text
    window.panel.precise.setChecked(True)  # greedy would write one text three times
    window.actions_by_name["three_takes"].trigger()
    assert not window.takes.busy and "Precise" in window.statusBar().currentMessage()

"""Per-machine measurements (CPU dtype, kernel, few-row layout, float16 products) are taken in
two rounds and remembered only when the machine was quiet; a damaged, old, implausible or
contradicted entry only means measuring again."""

from __future__ import annotations

import json

import pytest
from swiftwriter import paths
from swiftwriter.modelstore import loader, measurements

QUIET = {"others_share": 0.02, "load_per_cpu": 0.2, "cpus": 2}
BUSY = {"others_share": 0.62, "load_per_cpu": 2.9, "cpus": 2}


@pytest.fixture
def data(monkeypatch, tmp_path):
    monkeypatch.setenv("SWIFTWRITER_DATA_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def quiet(monkeypatch, data):
    """The load detector says the machine was quiet (the timings decide alone)."""
    monkeypatch.setattr(measurements, "load_facts", lambda cpu, wall: dict(QUIET))


@pytest.fixture
def busy(monkeypatch, data):
    monkeypatch.setattr(measurements, "load_facts", lambda cpu, wall: dict(BUSY))


def stored() -> dict:
    file = paths.data_dir() / "measurements.json"
    return json.loads(file.read_text()) if file.is_file() else {}


def steady(seconds):
    """A measure function whose every round times each kind at these seconds (+-2%)."""
    calls = []

    def measure():
        calls.append(1)
        return {k: [t * f for f in (1.0, 1.02, 0.98)] for k, t in seconds.items()}

    return measure, calls


def larger(seconds):
    return max(seconds, key=seconds.get)


def test_a_quiet_measurement_is_taken_once_and_survives_a_damaged_file(quiet):
    measure, calls = steady({"a": 0.002, "b": 0.001})
    assert measurements.remembered("k", measure, larger).value == "a"
    assert len(calls) == 2  # two independent rounds
    again = measurements.remembered("k", measure, larger)
    assert again.value == "a" and again.remembered and len(calls) == 2
    measurements.remembered("other", measure, larger)  # keys are independent
    assert len(calls) == 4 and set(stored()) == {"k", "other"}
    (paths.data_dir() / "measurements.json").write_text("{not json")
    assert measurements.remembered("k", measure, larger).value == "a" and len(calls) == 6
    assert measurements.remembered("k", measure, larger).remembered and len(calls) == 6


def test_each_entry_says_when_and_how_it_was_taken(quiet):
    import torch

    measure, _ = steady({"a": 0.002, "b": 0.001})
    measurements.remembered("k", measure, larger)
    entry = stored()["k"]
    assert entry["format"] == measurements.FORMAT and entry["value"] == "a"
    taken = entry["taken"]
    assert taken["at"].startswith("20") and taken["reps"] == {"a": 3, "b": 3}
    assert len(taken["rounds"]) == 2 and taken["rounds"][0]["a"] == pytest.approx(0.002)
    assert taken["spread"]["a"] == pytest.approx(1.02 / 0.98, rel=1e-3)
    assert taken["load"] == QUIET
    assert taken["versions"]["torch"] == torch.__version__ and taken["versions"]["swiftwriter"]
    assert measurements.unquiet_reasons(taken) == []


def test_an_unquiet_measurement_serves_this_run_and_is_never_stored(busy):
    measure, calls = steady({"a": 0.002, "b": 0.001})
    found = measurements.remembered("k", measure, larger)
    assert found.value == "a" and not found.remembered
    # a first round taken under load is not worth a second
    assert found.unquiet == ["other processes took 62% of the CPUs", "one round only"]
    assert "k" not in stored() and len(calls) == 1
    measurements.remembered("k", measure, larger)
    assert len(calls) == 2  # measured again at the next use


def test_rounds_that_disagree_or_scatter_are_not_remembered(quiet):
    rounds = iter([{"a": [0.002] * 3}, {"a": [0.010] * 3}])  # load came and went
    found = measurements.remembered("k", lambda: next(rounds), larger)
    assert not found.remembered and "rounds disagree on a (5.0x)" in found.unquiet
    scattered = {"a": [0.002, 0.002, 0.040]}  # one pass 20x another of its kind
    found = measurements.remembered("k", lambda: scattered, larger)
    assert not found.remembered and found.unquiet == ["a repetitions 20.0x apart", "one round only"]
    assert "k" not in stored()


def test_an_entry_of_an_earlier_version_is_measured_again(quiet):
    (paths.data_dir() / "measurements.json").write_text(json.dumps({"k": "b", "x": 3}))
    measure, calls = steady({"a": 0.002, "b": 0.001})
    found = measurements.remembered("k", measure, larger)
    assert found.value == "a" and found.remembered and len(calls) == 2
    assert stored()["x"] == 3  # others' entries stay as they are


def test_auto_dtype_takes_bfloat16_only_when_its_real_passes_are_ten_percent_cheaper():
    fp32 = {"1": 0.030, "8": 0.040}
    assert loader.choose_dtype({"float32": fp32, "bfloat16": {"1": 0.025, "8": 0.035}}) == (
        "bfloat16"
    )
    assert loader.choose_dtype({"float32": fp32, "bfloat16": {"1": 0.029, "8": 0.038}}) == (
        "float32"
    )  # 4% cheaper: not worth another rounding
    assert loader.choose_dtype({"float32": fp32}) == "float32"


def tiny_entry(tmp_path):
    from swiftwriter.modelstore.registry import ModelEntry

    return ModelEntry(id="tiny", name="tiny", source="folder", path=tmp_path)


def tiny_loads(monkeypatch, asked=None):
    """loader.load builds the tiny model in the dtype asked for (nothing read from disk)."""
    import torch
    from swiftwriter.modelstore.loader import LoadedModel

    from tests.conftest import build_tiny

    asked = [] if asked is None else asked

    def load(entry, device="cpu", dtype="auto", **kwargs):
        asked.append(dtype)
        model = build_tiny("llama", seed=1, max_positions=2048).to(getattr(torch, dtype))
        return LoadedModel(entry=entry, model=model, tokenizer=None, device=device, dtype=dtype)

    monkeypatch.setattr(loader, "load", load)
    return asked


def test_auto_dtype_times_the_models_real_passes_in_both_dtypes(monkeypatch, quiet, tmp_path):
    entry = tiny_entry(tmp_path)
    asked = tiny_loads(monkeypatch)
    # a tiny model's passes (a fraction of a millisecond) scatter more than a real model's,
    # and its 8-token pass may cost less than its one-token one: judged steady here
    monkeypatch.setattr(measurements, "SPREAD", 1e9)
    monkeypatch.setattr(measurements, "AGREE", 1e9)
    monkeypatch.setattr(loader, "implausible_passes", lambda seconds: "")
    choice = loader.measure_cpu_dtype(entry)
    assert asked == ["float32", "bfloat16"] * 2  # two rounds
    record = stored()
    (key,) = [k for k in record if k.startswith(f"{loader.DTYPE_KEY}|tiny|")]
    from swiftwriter.engine.passes import native

    # the attention the passes were timed with: this very build of the kernel
    assert key.endswith("|" + native.identity()) and native.identity().startswith(
        "swiftwriter_tree_"
    )
    found = record[key]
    costs = loader.pass_costs(found["seconds"])
    assert set(costs) == {"float32", "bfloat16"} and found["taken"]["reps"]["float32/1"] == 7
    assert all(t > 0 for c in costs.values() for t in c.values())
    assert choice == found["value"] == loader.choose_dtype(costs)
    assert loader.measure_cpu_dtype(entry) == choice and len(asked) == 4  # remembered
    monkeypatch.setenv("SWIFTWRITER_NATIVE", "0")  # other attention, other costs: measured anew
    loader.measure_cpu_dtype(entry)
    assert len(asked) == 8


def test_auto_keeps_exact_passes_unless_one_row_takes_another_kernel(monkeypatch):
    """Where a one-row product has a kernel of its own (the measured row class starts at two
    rows), exact passes would pad every one-token pass: auto then runs the fastest kernels and
    the run says it is not exact; where one row shares the kernel, passes stay exact."""
    from swiftwriter.engine import Generator, passes
    from swiftwriter.engine.passes.invariant import RowClasses
    from swiftwriter.modelstore.loader import exact_by_default_here

    from tests.conftest import build_tiny

    model = build_tiny("llama", seed=2)
    monkeypatch.setattr(passes, "row_classes", lambda m: RowClasses(2, 16))  # the door
    assert exact_by_default_here(model) is False
    gen = Generator(model)
    assert gen.invariant is False
    assert Generator(model, invariant=True).invariant is True  # asked for by hand
    list(gen.generate([5, 6, 7], 3))
    assert gen.stats.invariant is False
    monkeypatch.setattr(passes, "row_classes", lambda m: RowClasses(1, 27))
    assert exact_by_default_here(model) is True
    assert Generator(model).invariant is True


def _folder_model(tmp_path):
    """A registered folder model whose config gives its projection's shape (no weights: a
    load that got past the dtype check would fail)."""
    import json

    from swiftwriter.modelstore.registry import ModelEntry

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"hidden_size": 64, "intermediate_size": 96}))
    return ModelEntry(id="tiny", name="tiny", source="folder", path=folder)


def test_float16_on_a_cpu_without_its_arithmetic_is_refused_before_loading(
    monkeypatch, quiet, tmp_path
):
    """A CPU that emulates float16 would make a take crawl for minutes: the writer is told
    which dtype to choose, before any weight is read; the measurement is taken once, on the
    model's own projection shape."""
    import pytest
    from swiftwriter.errors import UserError

    timed = []

    def slow_half(width, out):
        timed.append((width, out))
        return {"float32": [0.001] * 3, "float16": [0.050] * 3}

    monkeypatch.setattr(loader, "time_float16_products", slow_half)
    entry = _folder_model(tmp_path)
    for _ in range(2):
        with pytest.raises(UserError, match="50x slower.*auto, bfloat16 or float32"):
            loader.load(entry, device="cpu", dtype="float16")
    assert timed == [(64, 96)] * 2  # two rounds, then remembered


def test_float16_with_its_own_arithmetic_passes_the_check(monkeypatch, quiet, tmp_path):
    monkeypatch.setattr(
        loader, "time_float16_products", lambda *a: {"float32": [0.002], "float16": [0.0015]}
    )
    assert loader.check_cpu_float16(_folder_model(tmp_path)) is None


def test_the_float16_measurement_times_both_dtypes():
    times = loader.time_float16_products(width=64, out=96, rows=2, reps=2)
    assert set(times) == {"float16", "float32"}
    assert all(len(t) == 2 and min(t) > 0 for t in times.values())


# This machine, quiet: bfloat16's one-token pass 23.4 ms, float32's 36 ms (the numbers).
QUIET_PASSES = {"float32": {1: 0.036, 8: 0.045}, "bfloat16": {1: 0.0234, 8: 0.030}}
# What a loaded machine once remembered: bfloat16 at 0.80 s (median of seven), so float32.
DEFECT = {
    "dtype": "float32",
    "pass_seconds": {"float32": {"1": 0.038, "8": 0.047}, "bfloat16": {"1": 0.80, "8": 0.95}},
    "context": 1000,
}


def fake_passes(monkeypatch, passes=QUIET_PASSES):
    """time_passes times each dtype's passes as `passes` says (+-2%), by the model's dtype."""

    def time_passes(model, *args, **kwargs):
        dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
        wobble = (1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0)
        return {n: [t * f for f in wobble] for n, t in passes[dtype].items()}

    monkeypatch.setattr(loader, "time_passes", time_passes)


def plant(entry, record) -> str:
    key = loader.dtype_key(entry)
    (paths.data_dir() / "measurements.json").write_text(json.dumps({key: record}))
    return key


def as_new_format(passes: dict, value: str, stale: str = "") -> dict:
    """A current-format entry with these pass seconds, claiming a quiet measurement."""
    seconds = {f"{d}/{n}": t for d, by_rows in passes.items() for n, t in by_rows.items()}
    taken = {
        "at": "2026-12-01T10:00:00+00:00",
        "reps": {k: 7 for k in seconds},
        "rounds": [seconds, seconds],
        "spread": {k: 1.05 for k in seconds},
        "load": QUIET,
        "versions": {"swiftwriter": "0.1.0", "python": "3.11.7", "torch": "2.13.0+cpu"},
    }
    record = {"format": measurements.FORMAT, "value": value, "seconds": seconds, "taken": taken}
    return {**record, "stale": stale} if stale else record


def test_a_remembered_float32_taken_under_load_is_corrected_by_the_next_auto_run(
    monkeypatch, quiet, tmp_path
):
    """The issue's measurements.json (float32, bfloat16 at 0.80 s) from before entries said
    how they were taken: the next `auto` load measures again and takes bfloat16."""
    entry = tiny_entry(tmp_path)
    asked = tiny_loads(monkeypatch)
    fake_passes(monkeypatch)
    key = plant(entry, DEFECT)
    assert loader.measure_cpu_dtype(entry) == "bfloat16" and asked
    assert stored()[key]["value"] == "bfloat16"
    assert loader.measure_cpu_dtype(entry) == "bfloat16" and len(asked) == 4  # now remembered


def test_the_planted_float32_is_measured_again_with_real_timing(monkeypatch, tmp_path):
    """The same plant, the tiny model's real passes, the real load detector: whatever this
    machine's load, the plant is not what auto goes by, and nothing unquiet is stored."""
    monkeypatch.setenv("SWIFTWRITER_DATA_DIR", str(tmp_path))
    entry = tiny_entry(tmp_path)
    asked = tiny_loads(monkeypatch)
    key = plant(entry, DEFECT)
    found = loader.cpu_dtype_choice(entry)
    if found.unquiet and found.unquiet[0].startswith("not measured"):  # busy now: not timed,
        assert not asked and found.value == loader.likely_dtype(entry)  # nor the plant believed
        return
    assert asked and found.seconds["bfloat16/1"] < 0.5  # timed now, not read back (0.80 s)
    assert found.value == loader.choose_dtype(loader.pass_costs(found.seconds))
    entry_now = stored().get(key)
    assert entry_now != DEFECT
    assert (entry_now is None) == bool(found.unquiet), found.unquiet


def test_an_entry_whose_numbers_are_implausible_is_measured_again(monkeypatch, quiet, tmp_path):
    """The same numbers in the current format, even claiming a quiet measurement: bfloat16
    21x float32 is not believed."""
    entry = tiny_entry(tmp_path)
    asked = tiny_loads(monkeypatch)
    fake_passes(monkeypatch)
    plant(entry, as_new_format(DEFECT["pass_seconds"], "float32"))
    found = loader.cpu_dtype_choice(entry)
    assert found.value == "bfloat16" and found.remembered and len(asked) == 4
    # an entry whose value its own numbers do not give is not believed either
    plant(entry, as_new_format({"float32": {1: 0.036, 8: 0.045}, "bfloat16": {1: 0.0234, 8: 0.03}},
                               "float32"))  # fmt: skip
    assert loader.measure_cpu_dtype(entry) == "bfloat16" and len(asked) == 8


def test_auto_says_what_it_measured_and_when(monkeypatch, quiet, tmp_path):
    entry = tiny_entry(tmp_path)
    tiny_loads(monkeypatch)
    fake_passes(monkeypatch)
    found = loader.cpu_dtype_choice(entry)
    today = found.taken["at"][:10]
    assert loader.dtype_reason(found) == (
        f"auto: measured 23 ms vs float32 36 ms per token, {today}"
    )
    monkeypatch.setattr(measurements, "load_facts", lambda cpu, wall: dict(BUSY))
    measurements.mark_stale(found.key, "a take ran it faster")  # busy: kept, not measured
    assert loader.dtype_reason(loader.cpu_dtype_choice(entry)) == (
        "auto: the last quiet measurement's, not measured: other processes took 62% of the "
        "CPUs; measured at a quiet start"
    )
    measurements.forget("tiny")
    assert loader.dtype_reason(loader.cpu_dtype_choice(entry)) == (
        "auto: a guess, not measured: other processes took 62% of the CPUs; measured at a "
        "quiet start"
    )


def test_a_take_that_contradicts_the_remembered_dtype_has_it_measured_again(
    monkeypatch, quiet, tmp_path
):
    """A remembered float32 whose passes were timed far slower than the take's own plain
    decoding runs (taken under load, plausible otherwise): the take marks it stale, says so,
    and the next auto load measures again."""
    from swiftwriter.store import Project
    from swiftwriter.writing.take import Take, TakeRequest

    from tests.ui.conftest import tiny_loaded

    loaded = tiny_loaded(seed=3)
    loaded.entry = tiny_entry(tmp_path)
    loaded.dtype_why = "auto: measured 5000 ms vs bfloat16 6000 ms per token, 2026-12-01"
    slow = {"float32": {1: 5.0, 8: 6.0}, "bfloat16": {1: 6.0, 8: 7.0}}
    key = plant(loaded.entry, as_new_format(slow, "float32"))
    assert loader.measure_cpu_dtype(loaded.entry) == "float32"  # believed until contradicted
    with Project.create(tmp_path / "p.swiftwriter", title="P") as project:
        doc = project.add_document("One", "the sea and the harbour wall at night")
        take = Take(TakeRequest(project, doc.id, loaded, prompt_text=None, target=6))
        result = take.run()
    assert result.status == "finished"
    assert "a take ran float32 at" in stored()[key]["stale"], stored()[key]
    assert "measured again at the next load: a take ran float32" in result.stats["dtype_why"]
    assert result.stats["dtype_why"].startswith("auto: measured 5000 ms")
    asked = tiny_loads(monkeypatch)
    fake_passes(monkeypatch)
    assert loader.measure_cpu_dtype(loaded.entry) == "bfloat16" and len(asked) == 4


def test_what_a_take_observes_decides_fairly(quiet, tmp_path):
    """Only a take faster than remembered is evidence (its step also pays sampling): 1.5x
    faster than the dtype's remembered one-token pass, or fast enough that the other dtype
    would not have been chosen, marks the entry stale; a slower take never does."""
    entry = tiny_entry(tmp_path)
    close = {"float32": {1: 0.036, 8: 0.045}, "bfloat16": {1: 0.034, 8: 0.043}}  # float32
    assert loader.choose_dtype(loader.pass_costs({f"{d}/{n}": t for d, c in close.items()
                                                  for n, t in c.items()})) == "float32"  # fmt: skip
    key = plant(entry, as_new_format(close, "float32"))
    assert loader.recheck_dtype(entry, "float32", 0.050) == ""  # slower: the load is now's
    assert loader.recheck_dtype(entry, "float32", 0.030) == ""  # the chosen one, a bit faster
    assert loader.recheck_dtype(entry, "bfloat16", 0.033) == ""  # not enough to flip
    why = loader.recheck_dtype(entry, "bfloat16", 0.030)
    assert why == "a take ran bfloat16 at 30 ms per token, faster than float32 remembered"
    assert stored()[key]["stale"] == why and loader.recheck_dtype(entry, "bfloat16", 0.01) == ""
    plant(entry, as_new_format(close, "float32"))
    assert "remembered 36 ms" in loader.recheck_dtype(entry, "float32", 0.020)


def test_a_take_after_a_shorter_context_is_no_evidence_of_a_slower_pass(quiet, tmp_path):
    """The remembered pass was timed after PASS_CONTEXT cached tokens; a take timed after
    fewer reads a shorter cache, so being faster by up to SHORTER_CONTEXT says nothing (each
    short take marked the default model's choice stale, and every start measured again)."""
    entry = tiny_entry(tmp_path)
    close = {"float32": {1: 0.036, 8: 0.045}, "bfloat16": {1: 0.034, 8: 0.043}}
    key = plant(entry, as_new_format(close, "float32"))
    short = loader.PASS_CONTEXT // 2
    assert loader.recheck_dtype(entry, "float32", 0.020, context=short) == ""
    assert loader.recheck_dtype(entry, "bfloat16", 0.030, context=short) == ""  # no flip
    assert "stale" not in stored()[key]
    why = loader.recheck_dtype(entry, "float32", 0.010, context=short)  # far faster still
    assert why == "a take ran float32 at 10 ms per token, remembered 36 ms"
    plant(entry, as_new_format(close, "float32"))
    at_length = loader.recheck_dtype(entry, "float32", 0.020, context=loader.PASS_CONTEXT)
    assert "remembered 36 ms" in at_length


def test_kernel_and_layout_are_remembered_only_when_quiet(monkeypatch, data):
    """The kernel and few-row measurements go through the same check as the dtype's."""
    from tests.conftest import build_tiny

    model = build_tiny("llama", seed=4)
    entry = tiny_entry(data)
    monkeypatch.setattr(measurements, "load_facts", lambda cpu, wall: dict(BUSY))
    loader.kernel_here(entry, model, "float32")
    loader.few_rows_here(entry, model, "float32")
    assert stored() == {}
    monkeypatch.setattr(measurements, "load_facts", lambda cpu, wall: dict(QUIET))
    monkeypatch.setattr(measurements, "SPREAD", 1e9)  # a tiny model's products scatter
    monkeypatch.setattr(measurements, "AGREE", 1e9)
    loader.kernel_here(entry, model, "float32")
    loader.few_rows_here(entry, model, "float32")
    kinds = {key.split("|")[0] for key in stored()}
    assert kinds == {"kernel-2", "few-rows"}
    assert all(e["taken"]["load"] == QUIET for e in stored().values())


def test_a_busy_machine_is_not_measured_at_the_start_and_nothing_unquiet_is_believed(
    monkeypatch, busy, tmp_path
):
    """(Injected load detector.) Measuring while the CPUs are busy took a minute at every
    start and could choose the slower dtype: nothing is timed, the planted entry (no record
    of a quiet measurement) is not believed, `auto` takes its guess, and the file keeps
    nothing new."""
    entry = tiny_entry(tmp_path)
    asked = tiny_loads(monkeypatch)
    fake_passes(monkeypatch)
    key = plant(entry, DEFECT)
    found = loader.cpu_dtype_choice(entry)
    assert not asked and found.value == loader.likely_dtype(entry) and not found.remembered
    assert stored()[key] == DEFECT  # untouched: the next quiet start measures


def test_a_measurement_while_two_processes_burn_both_cores_is_stored_only_if_quiet(data, tmp_path):
    """Real load, real detector: two children keep both cores busy while a real product is
    measured through the one mechanism. The scheduler decides how it goes, so the assertion
    holds either way: stored exactly when the check passed, and then on numbers and facts
    that pass it when read back; otherwise used for this run only, with the reasons."""
    import contextlib
    import subprocess
    import sys
    import time

    from swiftwriter.errors import UserError

    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        time.sleep(0.3)
        with contextlib.suppress(UserError):  # a busy machine may make float16 look hopeless
            loader.check_cpu_float16(_folder_model(tmp_path))
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    (key,) = [k for k in measurements.recent if k.startswith("float16-products|64x96|")]
    found = measurements.recent[key]
    entry = stored().get(key)
    assert (entry is not None) == found.remembered == (not found.unquiet), found.unquiet
    if entry is not None:
        assert measurements.unquiet_reasons(entry["taken"]) == []
        assert entry["taken"]["load"]["others_share"] <= measurements.OTHERS
    else:
        assert found.unquiet and found.value > 0


def test_the_speed_dock_says_how_auto_chose_the_dtype(qtbot):
    from swiftwriter.engine.decoding.stats import RunStats
    from swiftwriter.ui.stats_dock import StatsDock
    from swiftwriter.writing.take import LiveStats

    dock = StatsDock()
    qtbot.addWidget(dock)
    why = "auto: measured 23 ms vs float32 36 ms per token, 2026-12-05"
    dock.update_stats(LiveStats("generating", 10, run=RunStats(tokens=2, dtype="bfloat16",
                                                               invariant=True), dtype_why=why))  # fmt: skip
    assert dock.labels["precision"].text() == (
        "bfloat16 · exact: plain decoding's text\n"
        "(auto: measured 23 ms vs float32 36 ms per token, 2026-12-05)"
    )
    stale = f"{why}; auto's remembered choice is measured again at the next load: a take ran"
    dock.update_stats(LiveStats("generating", 10, run=RunStats(tokens=3, dtype="bfloat16"),
                                dtype_why=stale))  # fmt: skip
    assert dock.labels["precision"].text().splitlines()[1:] == [
        f"({why})",
        "(auto's remembered choice is measured again at the next load: a take ran)",
    ]


def test_bench_says_which_dtype_auto_chose_and_why(monkeypatch, tmp_path, capsys):
    from swiftwriter.cli import main
    from swiftwriter.modelstore import loader as loader_module

    from tests.commands.tiny_cli import install_tiny
    from tests.conftest import build_tiny

    install_tiny(monkeypatch, build_tiny("llama", vocab=16, seed=3))
    loaded = loader_module.load()
    loaded.dtype_why = "auto: measured 23 ms vs bfloat16 36 ms per token, 2026-12-05"
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("3 7 3 7 5 9 3 7 5 11 3 7")
    out = tmp_path / "report.json"
    argv = ["bench", "--prompt-file", str(prompt), "--max-new-tokens", "8", "--methods", "ar"]
    assert main([*argv, "--json", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"precision: float32 ({loaded.dtype_why})" in err.splitlines()
    assert json.loads(out.read_text())["meta"]["dtype_why"] == loaded.dtype_why

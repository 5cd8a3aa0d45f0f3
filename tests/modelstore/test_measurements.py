"""Per-machine measurements (CPU dtype, few-row layout) are taken once and read back; a
damaged file only means measuring again."""

from __future__ import annotations

from swiftwriter import paths
from swiftwriter.modelstore import loader


def test_a_measurement_is_taken_once_and_survives_a_damaged_file(monkeypatch, tmp_path):
    monkeypatch.setenv("SWIFTWRITER_DATA_DIR", str(tmp_path))
    calls = []

    def measure():
        calls.append(1)
        return len(calls) + 2

    def valid(v):
        return isinstance(v, int)

    assert loader._remembered("k", measure, valid) == 3
    assert loader._remembered("k", measure, valid) == 3 and len(calls) == 1
    assert loader._remembered("other", measure, valid) == 4  # keys are independent
    assert loader._remembered("k", measure, valid) == 3
    (paths.data_dir() / "measurements.json").write_text("{not json")
    assert loader._remembered("k", measure, valid) == 5 and len(calls) == 3
    assert loader._remembered("k", measure, valid) == 5


def test_auto_dtype_takes_bfloat16_only_when_its_real_passes_are_ten_percent_cheaper():
    fp32 = {"1": 0.030, "8": 0.040}
    assert loader.choose_dtype({"float32": fp32, "bfloat16": {"1": 0.025, "8": 0.035}}) == (
        "bfloat16"
    )
    assert loader.choose_dtype({"float32": fp32, "bfloat16": {"1": 0.029, "8": 0.038}}) == (
        "float32"
    )  # 4% cheaper: not worth another rounding
    assert loader.choose_dtype({"float32": fp32}) == "float32"


def test_auto_dtype_times_the_models_real_passes_in_both_dtypes(monkeypatch, tmp_path):
    import torch
    from swiftwriter.modelstore.loader import LoadedModel
    from swiftwriter.modelstore.registry import ModelEntry

    from tests.conftest import build_tiny

    monkeypatch.setenv("SWIFTWRITER_DATA_DIR", str(tmp_path))
    entry = ModelEntry(id="tiny", name="tiny", source="folder", path=tmp_path)
    asked = []

    def load(entry, device="cpu", dtype="auto", **kwargs):
        asked.append(dtype)
        model = build_tiny("llama", seed=1, max_positions=2048).to(getattr(torch, dtype))
        return LoadedModel(entry=entry, model=model, tokenizer=None, device=device, dtype=dtype)

    monkeypatch.setattr(loader, "load", load)
    choice = loader.measure_cpu_dtype(entry)
    assert asked == ["float32", "bfloat16"]
    import json

    record = json.loads((paths.data_dir() / "measurements.json").read_text())
    (key,) = [k for k in record if k.startswith("dtype-pass-3|tiny|")]
    from swiftwriter.engine import native

    # the attention the passes were timed with: this very build of the kernel
    assert key.endswith("|" + native.identity()) and native.identity().startswith(
        "swiftwriter_tree_"
    )
    found = record[key]
    assert set(found["pass_seconds"]) == {"float32", "bfloat16"}
    assert all(t > 0 for c in found["pass_seconds"].values() for t in c.values())
    assert choice == found["dtype"] == loader.choose_dtype(found["pass_seconds"])
    assert loader.measure_cpu_dtype(entry) == choice and len(asked) == 2  # remembered
    monkeypatch.setenv("SWIFTWRITER_NATIVE", "0")  # other attention, other costs: measured anew
    loader.measure_cpu_dtype(entry)
    assert len(asked) == 4


def test_auto_keeps_exact_passes_unless_one_row_takes_another_kernel(monkeypatch):
    """Where a one-row product has a kernel of its own (the measured row class starts at two
    rows), exact passes would pad every one-token pass: auto then runs the fastest kernels and
    the run says it is not exact; where one row shares the kernel, passes stay exact."""
    from swiftwriter.engine import Generator, leanpass
    from swiftwriter.engine.invariant import RowClasses
    from swiftwriter.modelstore.loader import exact_by_default_here

    from tests.conftest import build_tiny

    model = build_tiny("llama", seed=2)
    monkeypatch.setattr(leanpass, "row_classes", lambda m: RowClasses(2, 16))
    assert exact_by_default_here(model) is False
    gen = Generator(model)
    assert gen.invariant is False
    assert Generator(model, invariant=True).invariant is True  # asked for by hand
    list(gen.generate([5, 6, 7], 3))
    assert gen.stats.invariant is False
    monkeypatch.setattr(leanpass, "row_classes", lambda m: RowClasses(1, 27))
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


def test_float16_on_a_cpu_without_its_arithmetic_is_refused_before_loading(monkeypatch, tmp_path):
    """A CPU that emulates float16 would make a take crawl for minutes: the writer is told
    which dtype to choose, before any weight is read; the measurement is taken once, on the
    model's own projection shape."""
    import pytest
    from swiftwriter.errors import UserError

    monkeypatch.setenv("SWIFTWRITER_DATA_DIR", str(tmp_path))
    timed = []

    def slow_half(width, out):
        timed.append((width, out))
        return {"float32": 0.001, "float16": 0.050}

    monkeypatch.setattr(loader, "time_float16_products", slow_half)
    entry = _folder_model(tmp_path)
    for _ in range(2):
        with pytest.raises(UserError, match="50x slower.*auto, bfloat16 or float32"):
            loader.load(entry, device="cpu", dtype="float16")
    assert timed == [(64, 96)]


def test_float16_with_its_own_arithmetic_passes_the_check(monkeypatch, tmp_path):
    monkeypatch.setenv("SWIFTWRITER_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(
        loader, "time_float16_products", lambda *a: {"float32": 0.002, "float16": 0.0015}
    )
    assert loader.check_cpu_float16(_folder_model(tmp_path)) is None


def test_the_float16_measurement_times_both_dtypes():
    times = loader.time_float16_products(width=64, out=96, rows=2, reps=2)
    assert set(times) == {"float16", "float32"} and all(t > 0 for t in times.values())

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

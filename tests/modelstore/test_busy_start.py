"""A start on a busy machine (issue 63 item 3): the dtype `auto` takes is never measured while
other processes keep the CPUs (that took a minute at every start and once chose the slower
dtype). The last quiet choice is kept, even one a take has since questioned; with none, a
guess; a quiet start measures. Two real CPU burners beside the start."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from swiftwriter.modelstore import loader, measurements

from tests.modelstore.test_measurements import (
    QUIET_PASSES,
    as_new_format,
    fake_passes,
    plant,
    tiny_entry,
    tiny_loads,
)


@pytest.fixture
def burners():
    """Two processes that keep both cores busy while the test runs."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    time.sleep(0.5)
    yield
    for proc in procs:
        proc.kill()
        proc.wait()


def start_cpu_seconds(entry) -> tuple[tuple[str, str], float]:
    """What a start chooses, and the CPU seconds this process spent choosing."""
    before = time.process_time()
    chosen = loader.pick_dtype_why(entry, "cpu", "auto")
    return chosen, time.process_time() - before


@pytest.mark.slow
def test_a_start_beside_two_burners_keeps_the_quiet_choice_without_measuring(
    monkeypatch, tmp_path, burners
):
    monkeypatch.setenv("SWIFTWRITER_DATA_DIR", str(tmp_path))
    entry = tiny_entry(tmp_path)
    asked = tiny_loads(monkeypatch)
    fake_passes(monkeypatch)
    faster = "bfloat16" if sum(QUIET_PASSES["bfloat16"].values()) < sum(
        QUIET_PASSES["float32"].values()) else "float32"  # fmt: skip
    # measured quietly on an earlier day, then questioned by a take (stale): measured again
    # at the next quiet start, never while these burners run
    record = as_new_format(QUIET_PASSES, faster, stale="a take ran float32 faster")
    plant(entry, record)
    assert measurements.busy_now(), "the burners did not make the machine busy"
    (dtype, why), busy_cpu = start_cpu_seconds(entry)
    assert dtype == faster and not asked, why  # the measured-faster dtype, nothing timed
    assert "the last quiet measurement's" in why
    # a quiet start with that choice remembered (the stale mark cleared): the same cost
    plant(entry, {**record, "stale": ""})
    (quiet_dtype, _), quiet_cpu = start_cpu_seconds(entry)
    assert quiet_dtype == faster and not asked
    assert busy_cpu <= 1.5 * quiet_cpu + 0.05, (busy_cpu, quiet_cpu)


def test_a_busy_start_with_nothing_measured_guesses_and_leaves_it_to_a_quiet_start(
    monkeypatch, tmp_path
):
    monkeypatch.setenv("SWIFTWRITER_DATA_DIR", str(tmp_path))
    entry = tiny_entry(tmp_path)
    asked = tiny_loads(monkeypatch)
    fake_passes(monkeypatch)
    monkeypatch.setattr(measurements, "busy_now", lambda: "other processes took 90% of the CPUs")
    found = loader.cpu_dtype_choice(entry)
    assert found.value == loader.likely_dtype(entry) and not asked and not found.remembered
    assert not (tmp_path / "measurements.json").exists()
    monkeypatch.setattr(measurements, "busy_now", lambda: "")
    monkeypatch.setattr(measurements, "load_facts",
                        lambda cpu, wall: {"others_share": 0.0, "load_per_cpu": 0.1, "cpus": 2})  # fmt: skip
    assert loader.cpu_dtype_choice(entry).remembered and asked  # quiet: measured and kept

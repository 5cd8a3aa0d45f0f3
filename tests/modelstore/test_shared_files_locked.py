"""The user registry and the measurements file are read, changed and replaced whole; two
processes doing so at once (the app and a `swiftwriter models` command) must both land, so each
read-modify-write holds the file's lock (atomic.locked)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from swiftwriter import atomic
from swiftwriter.modelstore import measurements, registry


def _fake_model(folder):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"")
    return folder


def test_adding_a_model_waits_for_the_registry_lock(user_dirs):
    folder = _fake_model(user_dirs / "tiny")
    path = registry.user_registry_path()
    added = []
    with atomic.locked(path):
        worker = threading.Thread(target=lambda: added.append(registry.add_user_model("t", folder)))
        worker.start()
        worker.join(0.6)
        assert worker.is_alive(), "the registry was written while another held its lock"
        assert not path.exists()
    worker.join(10)
    assert added and added[0].id == "t"
    assert "t" in registry.load_registry()


WRITER = """
import sys
from swiftwriter.modelstore import measurements
me = sys.argv[1]
for n in range(40):
    measurements._update(lambda known: known.__setitem__(f"{me}-{n}", n))
"""


def test_two_processes_updating_measurements_lose_nothing(user_dirs):
    env = {**os.environ, "SWIFTWRITER_DATA_DIR": str(user_dirs / "data")}
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, name], env=env) for name in ("a", "b")
    ]
    assert [w.wait(120) for w in writers] == [0, 0]
    known = measurements._read()
    assert sorted(known) == sorted(f"{me}-{n}" for me in "ab" for n in range(40))
    leftovers = [p.name for p in measurements.cache_file().parent.iterdir()]
    assert not [name for name in leftovers if name.endswith(atomic.PARTIAL)], leftovers

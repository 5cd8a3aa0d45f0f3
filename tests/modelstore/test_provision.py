"""Provisioning the default model: a conversion killed midway is detected and redone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from swiftwriter.modelstore import provision, registry


@pytest.mark.slow
def test_killed_conversion_is_redone(tmp_path, monkeypatch):
    data = tmp_path / "data"
    env = dict(
        os.environ, SWIFTWRITER_DATA_DIR=str(data), SWIFTWRITER_CONFIG_DIR=str(tmp_path / "cfg")
    )
    env.pop("SWIFTWRITER_MODELS_DIR")  # the models go into this data folder, not the session's
    monkeypatch.delenv("SWIFTWRITER_MODELS_DIR")
    proc = subprocess.Popen(
        [sys.executable, "-m", "swiftwriter", "models", "prepare"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    models = data / "models"
    deadline = time.monotonic() + 120
    # Kill it once it is writing: the partial folder exists but nothing was renamed into place.
    while time.monotonic() < deadline:
        partials = list(models.glob(".smollm2-135m-instruct.partial-*")) if models.exists() else []
        if partials and any(partials[0].iterdir()):
            break
        assert proc.poll() is None, "conversion ended before it could be killed"
        time.sleep(0.05)
    else:
        pytest.fail("the conversion never started writing")
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    monkeypatch.setenv("SWIFTWRITER_DATA_DIR", str(data))
    entry = registry.default_entry()
    assert entry.status() == "not converted"
    assert not (models / entry.id).exists()

    # a named dtype (nothing to measure) that keeps the weights in the file: the folder is
    # written through the same partial folder as a float conversion, at a fraction of the time
    folder = provision.convert(entry, dtype=provision.STORED)
    assert entry.status() == "ready" and folder == models / entry.id
    assert entry.stored_dtype() == provision.STORED
    assert not list(models.glob(".*.partial-*")), "leftovers of the killed run were not removed"
    from swiftwriter.modelstore import loader

    loaded = loader.load(entry, device="cpu", dtype="float32")  # de-quantized from the file
    ids = loaded.tokenizer("Hello", return_tensors="pt").input_ids
    assert loaded.model(ids).logits.shape[-1] == 49152


def test_missing_package_or_bad_hash_is_a_clear_error(monkeypatch, tmp_path):
    from dataclasses import replace

    from swiftwriter.errors import UserError

    monkeypatch.setenv("SWIFTWRITER_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("SWIFTWRITER_MODELS_DIR")
    entry = registry.default_entry()
    with pytest.raises(UserError, match="not installed"):
        provision.convert(replace(entry, package="no-such-package-xyz"))
    with pytest.raises(UserError, match="sha256"):
        provision.convert(replace(entry, sha256="0" * 64))
    assert not any((tmp_path / "models").iterdir())

"""A model folder's config.json sized against this machine's memory before anything loads:
refused at `models add` when even its bfloat16 weights exceed all of the machine's memory, and
at a load on one device before `auto` measures (which loads the model as well)."""

from __future__ import annotations

import json
import re

import pytest
from swiftwriter.errors import UserError
from swiftwriter.modelstore import loader, registry, sizing

from tests.modelstore import hostile_models


@pytest.fixture
def folder(user_dirs, tiny_llama):
    tiny_llama.save_pretrained(user_dirs / "tiny")
    return user_dirs / "tiny"


def test_the_weights_are_sized_from_the_config_alone(folder, tiny_llama, tmp_path):
    values = sum(p.numel() for p in tiny_llama.parameters())
    assert values * 2 <= sizing.weights_bytes(folder, "bfloat16") <= values * 2 + 1024
    assert sizing.weights_bytes(folder, "float32") == 2 * sizing.weights_bytes(folder, "bfloat16")
    huge = hostile_models.oversized_folder(tmp_path / "huge")  # weights of 2 kB on disk
    assert sizing.weights_bytes(huge, "bfloat16") > 240 << 30


def test_a_folder_larger_than_this_machine_is_not_added(folder, monkeypatch):
    need = sizing.weights_bytes(folder, "bfloat16")
    monkeypatch.setattr(sizing, "all_memory", lambda: need - 1)
    said = f"{folder / 'config.json'}: its weights need "
    with pytest.raises(UserError, match=re.escape(said) + ".* in bfloat16, more than the .* of "
                       "memory this machine has"):  # fmt: skip
        registry.add_user_model("tiny", folder)
    assert not registry.user_registry_path().exists()
    monkeypatch.setattr(sizing, "all_memory", lambda: need)
    assert registry.add_user_model("tiny", folder).is_ready()


def test_too_many_layers_are_refused_before_the_estimate_builds_them(folder):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 100_000}))
    with pytest.raises(UserError, match="100,000 layers, more than the 1,024 allowed"):
        registry.add_user_model("deep", folder)


def test_a_load_too_large_for_its_device_is_refused_before_auto_measures(folder, monkeypatch):
    def measured(entry):
        raise AssertionError("auto measured: it loads the model")

    monkeypatch.setattr(loader, "cpu_dtype_choice", measured)
    monkeypatch.setattr(sizing, "device_memory", lambda device: 1000)
    entry = registry.resolve(str(folder))
    with pytest.raises(UserError, match="in bfloat16, more than the 1000 B of memory this machine"):
        loader.load(entry, device="cpu", dtype="auto")
    with pytest.raises(UserError, match="in float32, more than the 1000 B"):
        loader.load(entry, device="cpu", dtype="float32")

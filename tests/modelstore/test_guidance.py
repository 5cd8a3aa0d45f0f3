"""What a writer is told about models (modelstore/guidance.py): the size class follows this
machine's memory, a bigger model's speed is the measured one scaled by weight bytes, and adding
it says what it takes. No torch, no Qt."""

from __future__ import annotations

import json
import platform

import pytest
from swiftwriter.modelstore import guidance, loader, registry
from swiftwriter.modelstore.guidance import GIB, Speed, advise


@pytest.mark.parametrize(
    "gib, dtype, size",
    [
        (4, "bfloat16", None),
        (8, "bfloat16", "1.5B"),
        (16, "bfloat16", "3-4B"),
        (24, "bfloat16", "7-8B"),
        (32, "bfloat16", "7-8B"),
        (64, "bfloat16", "12-14B"),
        (128, "bfloat16", "24-32B"),
        (32, "float32", "3-4B"),  # a CPU without bfloat16 arithmetic: four bytes a weight
    ],
)
def test_the_size_recommended_is_the_largest_this_memory_runs(gib, dtype, size):
    advice = advise(gib * GIB, dtype)
    assert (advice.size.label if advice.size else None) == size
    if advice.size is not None:
        assert advice.size.running_bytes(dtype) <= guidance.SHARE * gib * GIB
        bigger = guidance.CLASSES[guidance.CLASSES.index(advice.size) + 1 :]
        assert all(c.running_bytes(dtype) > guidance.SHARE * gib * GIB for c in bigger)


def test_the_memory_a_model_takes_is_its_weights_its_kv_cache_and_the_app():
    eight = guidance.FICTION
    # Llama 3.1 8B: 32 layers, 8 key-value heads of 128, bfloat16: 128 KiB a token
    kv = 2 * 32 * 8 * 128 * 2 * guidance.CONTEXT
    assert eight.running_bytes("bfloat16") == int(8.03e9 * 2) + kv + guidance.RUNTIME
    assert eight.running_bytes("float32") - eight.running_bytes("bfloat16") == (
        int(8.03e9 * 4) - int(8.03e9 * 2) + kv
    )


def test_the_texts_say_what_the_built_in_model_is_for_and_what_to_add():
    small = advise(16 * GIB)
    assert small.welcome_text().startswith(
        "The built-in model (SmolLM2-135M-Instruct) is for trying SwiftWriter"
    )
    assert "This computer (16 GB of memory) can run a 3-4B model" in small.recommendation()
    assert "keep a story straight start at 7-8B, which take about 17 GB" in small.recommendation()
    assert small.welcome_text().endswith("To add one: Tools › Models…")
    roomy = advise(32 * GIB)
    assert "can run a 7-8B model such as Llama 3.1 8B" in roomy.recommendation()
    assert "It writes better" not in roomy.recommendation()
    assert "A 7-8B model is added as a Hugging Face folder (16 GB of bfloat16 weights" in (
        roomy.adding_text()
    )
    # a GGUF is de-quantised through float32 first: 8 bytes a parameter, more than 32 GB
    assert "about 60 GB of memory: more than this computer has" in roomy.adding_text()
    assert "Set Precision" not in roomy.adding_text()  # float32 weights fit in 32 GB
    tight = advise(24 * GIB)
    assert "Set Precision to bfloat16 before you use it" in tight.adding_text()
    huge = advise(512 * GIB)
    assert ", or as a GGUF file (about 20 GB as Q4_K_M)" in huge.adding_text()
    tiny = advise(4 * GIB)
    assert "has room for the built-in model only" in tiny.recommendation()
    assert tiny.adding_text() == ""
    unknown = advise(None)
    assert unknown.size is guidance.FICTION and "This computer" not in unknown.choosing_text()
    assert unknown.adding_text().startswith("A 7-8B model is added")


def test_a_bigger_model_s_speed_is_the_measured_one_scaled_by_weight_bytes():
    """25 ms a token for 270 MB of bfloat16 weights: an 8B model's 16 GB take 59 times as long,
    1.49 s a token, 29 words a minute at 1.4 tokens a word."""
    speed = Speed("bfloat16", 0.025, 270_000_000)
    assert speed.words_a_minute(guidance.FICTION) == pytest.approx(
        60 / (0.025 * 8.03e9 * 2 / 270e6) / 1.4
    )
    text = advise(32 * GIB, speed=speed).recommendation()
    assert "about 17 GB of memory while it writes, about 29 words a minute here." in text
    assert "words a minute" not in advise(32 * GIB).recommendation()  # nothing measured


def test_a_folder_s_parameters_are_counted_from_its_safetensors_headers(tmp_path):
    import numpy as np
    from safetensors.numpy import save_file

    save_file({"a": np.zeros((3, 4), np.float32), "b": np.zeros(5, np.float16)},
              str(tmp_path / "model-1.safetensors"), metadata={"format": "pt"})  # fmt: skip
    save_file({"c": np.zeros((2, 2, 2), np.float32)}, str(tmp_path / "model-2.safetensors"))
    assert guidance.folder_parameters(tmp_path) == 12 + 5 + 8
    (tmp_path / "model-3.safetensors").write_bytes(b"\x01")  # a damaged file: no count
    assert guidance.folder_parameters(tmp_path) is None
    assert guidance.folder_parameters(tmp_path / "missing") is None


def remember_pass(entry, seconds: dict, value: str, stale: bool = False) -> None:
    """A dtype measurement as a load stores it (the key's torch and kernel parts aside)."""
    from swiftwriter.modelstore import measurements

    key = f"{loader.DTYPE_KEY}|{entry.id}|{loader._cpu_name()}|{platform.machine()}|torch|kernel"
    found = {"format": measurements.FORMAT, "value": value, "seconds": seconds,
             "taken": {"at": "2026-12-06T19:05:11+00:00"}}  # fmt: skip
    if stale:
        found["stale"] = "a take contradicted it"
    measurements.cache_file().parent.mkdir(parents=True, exist_ok=True)
    measurements.cache_file().write_text(json.dumps({key: found}))


def test_the_speed_comes_from_the_dtype_an_earlier_load_measured(user_dirs, monkeypatch):
    """The chosen dtype's one-token pass, as remembered, for the model's own parameters; a
    stale measurement, or none, gives no speed (and no words a minute)."""
    import numpy as np
    from safetensors.numpy import save_file

    folder = user_dirs / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    save_file({"w": np.zeros((100, 10), np.float32)}, str(folder / "model.safetensors"))
    entry = registry.add_user_model("tiny", folder)
    seconds = {"bfloat16/1": 0.02, "bfloat16/8": 0.03, "float32/1": 0.04, "float32/8": 0.05}
    assert guidance.measured_speed(entry) is None
    remember_pass(entry, seconds, "bfloat16")
    assert loader.remembered_pass(entry) == ("bfloat16", 0.02)
    assert guidance.measured_speed(entry) == Speed("bfloat16", 0.02, 1000 * 2)
    monkeypatch.setattr(guidance, "total_memory", lambda: 32 * GIB)
    advice = guidance.for_this_machine("tiny")
    assert advice.speed == Speed("bfloat16", 0.02, 2000) and advice.dtype == "bfloat16"
    assert advice.built_in == registry.default_entry().name
    remember_pass(entry, seconds, "float32")
    assert guidance.for_this_machine("tiny").dtype == "float32"  # four bytes a weight here
    remember_pass(entry, seconds, "bfloat16", stale=True)
    assert loader.remembered_pass(entry) is None


def test_a_gguf_run_as_stored_is_scaled_by_its_files_bytes(user_dirs, monkeypatch, tmp_path):
    """`auto` may choose a GGUF's blocks as stored: the speed is then that pass for the file's
    bytes, a bigger model's is scaled to its Q4_K_M file, and the welcome text says so (the
    app once failed to start here: "stored" had no bytes a weight)."""
    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(b"\0" * 4000)
    entry = registry.ModelEntry(id="mine", name="mine", source="gguf", file=str(gguf))
    monkeypatch.setattr(registry, "load_registry", lambda: {"mine": entry})
    seconds = {"stored/1": 0.01, "stored/8": 0.02, "bfloat16/1": 0.02, "bfloat16/8": 0.03}
    remember_pass(entry, seconds, loader.STORED)
    assert guidance.measured_speed(entry) == Speed(loader.STORED, 0.01, 4000)
    monkeypatch.setattr(guidance, "total_memory", lambda: 16 * GIB)
    advice = guidance.for_this_machine("mine")
    assert advice.dtype == loader.STORED and advice.size.label == "12-14B"  # bfloat16: 3-4B
    text = advice.welcome_text()
    assert "12-14B" in text
    fiction = guidance.FICTION
    minutes = advice.speed.words_a_minute(fiction)
    assert minutes == pytest.approx(
        60
        / (0.01 * fiction.parameters * guidance.Q4_K_M_BITS / 8 / 4000)
        / guidance.DEFAULT_TOKENS_PER_WORD
    )
    gguf.unlink()  # the file gone: no speed, and still a welcome
    assert guidance.measured_speed(entry) is None
    assert "3-4B" in guidance.for_this_machine("mine").welcome_text()  # bfloat16 assumed

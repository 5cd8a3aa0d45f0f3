"""Adding a GGUF file as a model (`swiftwriter models add NAME FILE.gguf`): its weights kept as
the file stores them (or converted once into its own folder in a dtype asked for by name),
registered with its chat template and context length, refused in one line (leaving nothing)
when it cannot be read, and cancelled without leftovers."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import torch
from swiftwriter import paths
from swiftwriter.cli import main
from swiftwriter.errors import UserError
from swiftwriter.modelstore import adding, gguf_file, loader, provision, registry, sizing

from tests.modelstore import hostile_models
from tests.modelstore.tiny_gguf import CHAT, tiny_model, write_gguf


@pytest.fixture(scope="module")
def tiny():
    return tiny_model()


def _leftovers() -> list[str]:
    models = paths.models_dir()
    return sorted(p.name for p in models.iterdir()) if models.exists() else []


def _weights(entry, dtype: str) -> dict:
    loaded = loader.load(entry, device="cpu", dtype=dtype, cpu_layout=False, with_drafter=False)
    return {k: v.detach().clone() for k, v in loaded.model.state_dict().items()}


def test_a_gguf_is_converted_registered_and_generates(user_dirs, tiny, capsys):
    path = write_gguf(user_dirs / "tiny.gguf", tiny, qtype="Q8_0")
    assert main(["models", "add", "tiny", str(path), "--dtype", "bfloat16"]) == 0
    err = capsys.readouterr().err
    assert "kB on disk" in err and "16 Q8_0" in err  # said before converting
    assert "In memory: " in err and " in bfloat16" in err
    entry = registry.load_registry()["tiny"]
    assert (entry.source, entry.user, entry.file) == ("gguf", True, str(path.resolve()))
    assert entry.chat_template == CHAT and entry.context_length == 2048
    assert entry.is_ready() and entry.stored_dtype() == "bfloat16"
    assert entry.folder() == paths.models_dir() / "tiny"
    assert _leftovers() == ["tiny"]  # no partial folder beside it
    prompt = user_dirs / "prompt.txt"
    prompt.write_text("the sea was grey and the")
    args = ["generate", "--prompt-file", str(prompt), "--model", "tiny", "--max-new-tokens", "8",
            "--dtype", "bfloat16", "--device", "cpu", "--preset", "precise"]  # fmt: skip
    assert main(args) == 0
    assert capsys.readouterr().out.strip()  # the text (test_float32_weights... checks the
    loaded = loader.load(  # weights it comes from bit for bit)
        entry, device="cpu", dtype="bfloat16", cpu_layout=False, with_drafter=False
    )
    assert loaded.tokenizer.chat_template == CHAT
    assert loaded.model.config.max_position_embeddings == 2048


def test_float32_weights_are_the_files_own_and_bfloat16_converts_again(user_dirs, tiny):
    """A float32 GGUF stored in bfloat16 loses bits: a float32 load converts again, and then
    holds exactly the model the file was written from."""
    path = write_gguf(user_dirs / "f32.gguf", tiny, qtype="F32")
    entry = adding.add_gguf("f32", path, dtype="bfloat16")
    assert entry.stored_dtype() == "bfloat16" and not entry.manifest()["lossless"]
    assert not provision.serves(entry, "float32") and provision.serves(entry, "bfloat16")
    bf16 = _weights(entry, "bfloat16")
    for name, value in tiny.state_dict().items():
        assert torch.equal(bf16[name], value.to(torch.bfloat16)), name
    f32 = _weights(entry, "float32")  # converts again: the stored bfloat16 cannot give it
    assert entry.stored_dtype() == "float32"
    for name, value in tiny.state_dict().items():
        assert torch.equal(f32[name], value), name


def test_a_lossless_bfloat16_folder_serves_float32_as_it_is(user_dirs, tiny):
    path = write_gguf(user_dirs / "bf16.gguf", tiny, qtype="BF16")
    entry = adding.add_gguf("bf16", path, dtype="bfloat16")
    assert entry.manifest()["lossless"] and provision.serves(entry, "float32")
    converted_at = entry.manifest()["converted_at"]
    f32 = _weights(entry, "float32")
    assert entry.stored_dtype() == "bfloat16" and entry.manifest()["converted_at"] == converted_at
    assert all(v.dtype == torch.float32 for v in f32.values())


def test_auto_keeps_the_files_weights_as_stored(user_dirs, tiny):
    """No copy of the weights: the folder holds config and tokenizer, each load reads the file
    (as stored, or de-quantized into the dtype asked for, bit for bit the file's values)."""
    messages = []
    path = write_gguf(user_dirs / "kept.gguf", tiny, qtype="Q8_0")
    entry = adding.add_gguf("kept", path, progress=messages.append)
    assert entry.stored_dtype() == "stored" and entry.is_ready()
    assert not list(entry.folder().glob("*.safetensors"))
    assert sum(f.stat().st_size for f in entry.folder().iterdir()) < path.stat().st_size
    assert any("the file's own size" in m for m in messages)
    stored = loader.load(entry, device="cpu", dtype="stored", with_drafter=False)
    assert "Q8_0 x" in stored.precision() and stored.model.model.layers[0].mlp.down_proj.qweight
    reference = gguf_file_weights(path)
    f32 = _weights(entry, "float32")
    for name, value in reference.items():
        assert torch.equal(f32[name], value), name


def gguf_file_weights(path) -> dict:
    """The file's weights as transformers de-quantizes them."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
    return {k: v.detach() for k, v in model.state_dict().items()}


def test_without_the_kernel_auto_stores_the_dtype_measured_on_the_float32_weights(
    user_dirs, tiny, monkeypatch
):
    from swiftwriter.modelstore.measurements import Measured

    monkeypatch.setattr(loader, "can_store", lambda entry: "no kernel here")

    seen = []

    def measured(entry):
        config = json.loads((entry.folder() / "config.json").read_text())
        seen.append((entry.id, config.get("dtype")))
        seconds = {"float32/1": 0.02, "bfloat16/1": 0.01}
        return Measured("k", "bfloat16", seconds, {"at": "2026-12-05"}, remembered=True)

    monkeypatch.setattr(loader, "pick_device", lambda device="auto": "cpu")
    monkeypatch.setattr(loader, "cpu_dtype_choice", measured)
    messages = []
    entry = adding.add_gguf(
        "auto", write_gguf(user_dirs / "a.gguf", tiny), progress=messages.append
    )
    assert seen == [("auto", "float32")]  # measured under the model's own id, on float32 weights
    assert entry.stored_dtype() == "bfloat16"
    assert "auto: measured 10 ms vs float32 20 ms" in entry.manifest()["dtype_why"]
    assert any("in float32 or" in m and "in bfloat16" in m for m in messages)
    memory = gguf_file.size(sum(t.numel() for t in tiny.state_dict().values()) * 2)
    chose = "auto chose bfloat16 (auto: measured 10 ms vs float32 20 ms per token, 2026-12-05)"
    assert f"{chose}: {memory} in memory" in messages
    assert not list(entry.folder().glob("*.index.json"))
    config = json.loads((entry.folder() / "config.json").read_text())
    assert config["dtype"] == "bfloat16"


def test_a_choice_measured_on_a_busy_machine_stores_float32(user_dirs, tiny, monkeypatch):
    """Without the kernel, a choice not remembered lets the next load measure again and
    choose float32: a bfloat16 folder would then be converted again, so float32 (which serves
    both exactly) is stored."""
    from swiftwriter.modelstore.measurements import Measured

    monkeypatch.setattr(loader, "can_store", lambda entry: "no kernel here")
    seconds = {"float32/1": 0.02, "bfloat16/1": 0.01}
    busy = Measured("k", "bfloat16", seconds, unquiet=["other processes took 86% of the CPUs"])
    monkeypatch.setattr(loader, "pick_device", lambda device="auto": "cpu")
    monkeypatch.setattr(loader, "cpu_dtype_choice", lambda entry: busy)
    entry = adding.add_gguf("busy", write_gguf(user_dirs / "b.gguf", tiny))
    assert entry.stored_dtype() == "float32"
    assert "86% of the CPUs; kept in float32" in entry.manifest()["dtype_why"]


def _truncated(folder, tiny):
    whole = write_gguf(folder / "whole.gguf", tiny).read_bytes()
    path = folder / "cut.gguf"
    path.write_bytes(whole[: len(whole) * 2 // 3])
    return path


def _text(folder, tiny):
    path = folder / "notes.gguf"
    path.write_text("These are my notes, not a model.\n")
    return path


def _bare(folder, tiny):
    """A llama header and nothing else."""
    path = folder / "bare.gguf"
    path.write_bytes(hostile_models.gguf_bytes([hostile_models.LLAMA]))
    return path


def _huge_vocabulary_size(folder, tiny):
    import gguf

    path = write_gguf(folder / "vocab.gguf", tiny)
    reader = gguf.GGUFReader(path, "r+")
    reader.fields["llama.vocab_size"].parts[-1][0] = 3_000_000
    reader.data.flush()
    return path


REFUSED = [
    (_text, "is not a GGUF file"),
    (_truncated, "is truncated"),
    (_bare, "bare.gguf holds no tensors"),
    (lambda folder, tiny: hostile_models.overlapping(folder / "o.gguf", tiny),
     "o.gguf: tensor 'blk.0.ffn_norm.weight' overlaps tensor 'blk.0.attn_norm.weight'"),
    (lambda folder, tiny: hostile_models.non_utf8_architecture(folder / "a.gguf", tiny),
     "a.gguf: general.architecture is not UTF-8 text"),
    (_huge_vocabulary_size, "a vocabulary of 3,000,000 tokens (llama.vocab_size), more than"),
    (lambda folder, tiny: write_gguf(folder / "odd.gguf", tiny, arch="frobnicator"),
     "cannot read the architecture 'frobnicator'"),
    (lambda folder, tiny: write_gguf(folder / "i8.gguf", tiny, qtype="I8"),
     "cannot de-quantise its I8 tensors"),
]  # fmt: skip


IDS = ["text", "truncated", "bare", "overlap", "utf8", "vocabulary", "arch", "quant"]


@pytest.mark.parametrize("make, why", REFUSED, ids=IDS)
def test_a_refused_file_is_one_line_and_leaves_nothing(user_dirs, tiny, capsys, make, why):
    path = make(user_dirs, tiny)
    before = _leftovers()
    assert main(["models", "add", "mine", str(path)]) != 0
    err = capsys.readouterr().err
    assert why in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert _leftovers() == before
    assert "mine" not in registry.load_registry()
    assert not registry.user_registry_path().exists()


@pytest.mark.parametrize("at", [1, 2, 3, 4, 5])  # every point the conversion asks
def test_cancel_leaves_nothing(user_dirs, tiny, at):
    path = write_gguf(user_dirs / "c.gguf", tiny)
    asked = []

    def cancelled() -> bool:
        asked.append(1)
        return len(asked) >= at

    with pytest.raises(provision.Cancelled):
        adding.add_gguf("cancel-me", path, dtype="float32", cancelled=cancelled)
    assert len(asked) == at
    assert _leftovers() == [] and "cancel-me" not in registry.load_registry()


def test_a_conversion_larger_than_this_machine_is_refused_before_anything_is_written(
    user_dirs, tiny, monkeypatch
):
    path = write_gguf(user_dirs / "big.gguf", tiny)
    need = gguf_file.inspect(path).conversion_memory()
    monkeypatch.setattr(sizing, "machine_memory", lambda: need - 1)
    with pytest.raises(UserError, match=r"big.gguf: converting it needs about .* of memory, more"):
        adding.add_gguf("big", path, dtype="float32")
    assert _leftovers() == [] and "big" not in registry.load_registry()


def test_what_killed_conversions_left_is_removed_whatever_their_name(user_dirs, tiny):
    """A conversion killed by the system runs no cleanup: the next one removes its folder, but
    never one whose process still runs."""
    models = paths.models_dir()
    gone = _finished_pid()
    for name in (f".old.partial-{gone}", f".other.partial-{gone}", f".live.partial-{os.getppid()}"):
        (models / name).mkdir(parents=True)
    path = write_gguf(user_dirs / "c.gguf", tiny)
    with pytest.raises(provision.Cancelled):  # the second check: after the cleanup
        adding.add_gguf("new", path, dtype="float32", cancelled=iter([False, True]).__next__)
    assert _leftovers() == [f".live.partial-{os.getppid()}"]


def _finished_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_taken_name_is_refused_before_anything_is_read(user_dirs, tiny):
    path = write_gguf(user_dirs / "t.gguf", tiny)
    with pytest.raises(UserError, match="already a model named"):
        adding.add_gguf(registry.default_entry().id, path)
    assert _leftovers() == []


def test_prepare_converts_again_only_for_another_dtype(user_dirs, tiny, capsys):
    entry = adding.add_gguf("p", write_gguf(user_dirs / "p.gguf", tiny), dtype="bfloat16")
    stamp = entry.manifest()["converted_at"], (entry.folder() / "model.safetensors").stat()
    assert main(["models", "prepare", "p"]) == 0
    assert "ready" in capsys.readouterr().out
    assert (
        entry.manifest()["converted_at"],
        (entry.folder() / "model.safetensors").stat(),
    ) == stamp
    assert main(["models", "prepare", "p", "--dtype", "float32"]) == 0
    assert entry.stored_dtype() == "float32"


def test_list_json_is_valid_and_says_the_stored_dtype(user_dirs, tiny, capsys):
    adding.add_gguf("j", write_gguf(user_dirs / "j.gguf", tiny), dtype="bfloat16")
    assert main(["models", "list", "--json"]) == 0
    rows = {row["id"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["j"]["stored_dtype"] == "bfloat16" and rows["j"]["status"] == "ready"
    assert rows["j"]["context_length"] == 2048 and rows["j"]["chat_template"] is True
    assert rows[registry.default_entry().id]["default"] is True


def test_an_old_manifest_is_a_float32_folder_that_serves_every_dtype(user_dirs):
    entry = registry.default_entry()
    folder = paths.models_dir() / entry.id
    folder.mkdir(parents=True)
    (folder / "swiftwriter-manifest.json").write_text(json.dumps({"gguf_sha256": entry.sha256}))
    assert entry.is_ready() and entry.stored_dtype() == "float32"
    assert all(provision.serves(entry, d) for d in ("float32", "bfloat16", "float16"))
    assert provision.folder_for(entry, "bfloat16") == folder


def test_a_linked_folder_is_never_replaced_a_copy_in_the_cache_serves(user_dirs, tiny, monkeypatch):
    """The test session reaches the writer's model through a link: a dtype its stored weights
    cannot give is converted once into the cache instead, and the link's target stays."""
    monkeypatch.setenv("SWIFTWRITER_CACHE_DIR", str(user_dirs / "cache"))
    entry = adding.add_gguf("linked", write_gguf(user_dirs / "l.gguf", tiny), dtype="bfloat16")
    real = user_dirs / "real-linked"
    entry.folder().rename(real)
    entry.folder().symlink_to(real, target_is_directory=True)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in real.iterdir())
    copy = provision.folder_for(entry, "float32")
    assert copy == paths.cache_dir() / "converted" / "linked-float32"
    assert json.loads((copy / "swiftwriter-manifest.json").read_text())["dtype"] == "float32"
    stamp = (copy / "swiftwriter-manifest.json").stat().st_mtime_ns
    assert provision.folder_for(entry, "float32") == copy  # converted once
    assert (copy / "swiftwriter-manifest.json").stat().st_mtime_ns == stamp
    assert sorted((p.name, p.stat().st_mtime_ns) for p in real.iterdir()) == before
    assert entry.folder().is_symlink() and entry.stored_dtype() == "bfloat16"
    f32 = _weights(entry, "float32")
    for name, value in tiny.state_dict().items():
        assert torch.equal(f32[name], value), name

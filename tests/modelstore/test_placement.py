"""Placement: memory limits as written on the command line, memory estimates against what a
model really allocates, accelerate's map with room for the KV cache, and a model spread over
the CPU and disk writing exactly what the single-device model writes (greedy and sampled,
speculation on)."""

from __future__ import annotations

import random

import pytest
import torch
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.passes.verify import ModelRunner
from swiftwriter.errors import UserError
from swiftwriter.modelstore import placement

from tests.conftest import build_tiny
from tests.engine.decoding.test_exactness import repetitive_prompt


def test_memory_limits_are_read_as_written():
    assert placement.parse_size("20GiB") == 20 << 30
    assert placement.parse_size("512 MB") == 512 * 10**6
    assert placement.parse_size("1.5GiB") == int(1.5 * (1 << 30))
    assert placement.parse_max_memory("cuda:0=20GiB, cpu=64GiB,disk=1TB") == {
        0: 20 << 30,
        "cpu": 64 << 30,
        "disk": 10**12,
    }
    for bad in ("cuda:0", "gpu=1GiB", "cpu=lots", "cpu=0GiB", "cpu=1GiB,cpu=2GiB", ""):
        with pytest.raises(UserError):
            placement.parse_max_memory(bad)
    with pytest.raises(UserError, match="goes with --device-map"):
        placement.Placement("cpu", None, {"cpu": 1 << 30})


@pytest.mark.parametrize("tied", [False, True])
def test_estimates_match_what_the_model_allocates(tied):
    model = build_tiny("llama", seed=3, layers=3)
    model.config.tie_word_embeddings = tied
    if tied:
        model.tie_weights()
    est = placement.estimate(model.config, "float32", context=300)
    tensors = [*model.parameters(), *model.buffers()]  # the rotary tables are buffers
    held = {t.data_ptr(): t.numel() * t.element_size() for t in tensors}
    assert est.weights == {"device": sum(held.values())}
    runner = ModelRunner(model)
    runner.prefill([2 + i % 250 for i in range(300)])  # 300 tokens in the cache
    allocated = sum(
        layer.keys.numel() * layer.keys.element_size()
        + layer.values.numel() * layer.values.element_size()
        for layer in runner.cache.layers
    )
    assert est.kv == {"device": allocated}
    assert est.total() == est.weights["device"] + allocated


def test_the_map_keeps_room_for_the_kv_cache_and_offloads_the_rest():
    config = build_tiny("llama", seed=3, layers=4).config
    blocks = placement.module_bytes(config, "float32")
    layer = blocks["model.layers.0"]
    kv = placement.kv_bytes_per_token(config, "float32") * 200
    # room for the cache, the embedding and two layers on the CPU: the rest goes to disk
    cpu = kv + blocks["model.embed_tokens"] + 2 * layer + blocks["model.norm"] + 64
    device_map = placement.plan_device_map(config, "float32", {"cpu": cpu}, context=200)
    assert "disk" in device_map.values() and "cpu" in device_map.values()
    est = placement.estimate(config, "float32", 200, device_map)
    assert est.weights["cpu"] + est.kv["cpu"] <= cpu
    assert est.total() == sum(blocks.values()) + kv
    with pytest.raises(UserError, match="cannot hold the KV cache of 5,000 tokens"):
        placement.plan_device_map(config, "float32", {"cpu": cpu}, context=5000)


def _generate(model, prompt, sampling, drafting):
    gen = Generator(model, sampling, drafting, calibrate=False)
    out = [t for ev in gen.generate(prompt, 60) for t in ev.tokens]
    return out, gen.stats


def test_a_model_spread_over_cpu_and_disk_writes_the_same_text(tmp_path):
    from transformers import AutoModelForCausalLM

    model = build_tiny("llama", seed=5, layers=3)
    model.save_pretrained(tmp_path / "tiny")
    device_map = {
        "model.embed_tokens": "cpu",
        "model.layers.0": "cpu",
        "model.layers.1": "disk",
        "model.layers.2": "disk",
        "model.norm": "cpu",
        "model.rotary_emb": "cpu",
        "lm_head": "cpu",
    }
    spread = AutoModelForCausalLM.from_pretrained(
        tmp_path / "tiny",
        device_map=device_map,
        offload_folder=str(tmp_path / "offload"),
        attn_implementation="sdpa",
    )
    assert any(p.device.type == "meta" for p in spread.parameters())  # really offloaded
    assert ModelRunner(spread).backend.name == "stock"  # accelerate's hooks keep the stock forward
    prompt = repetitive_prompt(random.Random(6), 256, 80)
    drafts = DraftSettings(sources=("ngram", "suffix"), adaptive=False)
    for sampling in (
        SamplingSettings(greedy=True, penalty=1.2, window=64),
        SamplingSettings(greedy=False, penalty=1.2, window=64, min_p=0.1, seed=2),
    ):
        alone, _ = _generate(model, prompt, sampling, DraftSettings.plain())
        got, stats = _generate(spread, prompt, sampling, drafts)
        assert got == alone, sampling
        assert stats.accepted_drafts > 0 or not sampling.greedy
    assert torch.equal(
        spread.lm_head.weight, model.lm_head.weight
    )  # the weights on the CPU are the saved ones


def test_a_tied_model_loads_on_the_planned_map_and_writes_the_same_text(tmp_path):
    """The default model ties its lm_head to its embedding: the planned map must keep them
    together, or the offloaded weights miss the head."""
    from transformers import AutoModelForCausalLM

    model = build_tiny("llama", seed=9, layers=4)
    model.config.tie_word_embeddings = True
    model.tie_weights()
    model.save_pretrained(tmp_path / "tied")
    config = model.config
    blocks = placement.module_bytes(config, "float32")
    kv = placement.kv_bytes_per_token(config, "float32") * 200
    cpu = kv + blocks["model.embed_tokens"] + blocks["model.layers.0"] + 4096
    device_map = placement.plan_device_map(config, "float32", {"cpu": cpu}, context=200)
    assert "disk" in device_map.values()
    spread = AutoModelForCausalLM.from_pretrained(
        tmp_path / "tied", device_map=device_map, offload_folder=str(tmp_path / "off")
    )
    prompt = repetitive_prompt(random.Random(7), 256, 60)
    greedy = SamplingSettings(greedy=True, penalty=1.2, window=64)
    alone, _ = _generate(model, prompt, greedy, DraftSettings.plain())
    got, _ = _generate(spread, prompt, greedy, DraftSettings(sources=("ngram",), adaptive=False))
    assert got == alone


@pytest.mark.parametrize("device", ["meta", "xpu", "cuda:x", "gpu", "", "CPU"])
def test_a_device_no_model_runs_on_is_refused_before_anything_loads(device):
    with pytest.raises(UserError, match="auto, cpu, cuda, cuda:N or mps, not"):
        placement.Placement(device)


def test_a_gpu_index_torch_does_not_see_is_refused(monkeypatch):
    """On a machine with one GPU, cuda:3 is one clear line, not a failure deep in the load."""
    from swiftwriter.modelstore import loader

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert loader.pick_device("cuda:0") == "cuda:0" and loader.pick_device("cuda") == "cuda"
    with pytest.raises(UserError, match="cuda:3 was asked for, but torch sees 1 GPU$"):
        loader.pick_device("cuda:3")
    with pytest.raises(UserError, match="not 'meta'"):
        loader.pick_device("meta")


@pytest.mark.parametrize("native", ["bfloat16", "float16"])
def test_a_gguf_model_on_a_gpu_says_its_blocks_are_not_run_as_stored(monkeypatch, native):
    """The stored blocks' kernels are the CPU's: on a GPU `auto` converts the file to the
    GPU's dtype, and the precision line says so (a folder model's line is unchanged)."""
    from swiftwriter.modelstore import loader, registry

    monkeypatch.setattr(loader, "gpu_dtype", lambda kind: native)
    gguf = registry.ModelEntry(id="file", name="file", source="gguf", file="file.gguf")
    dtype, why = loader.pick_dtype_why(gguf, "cuda", "auto")
    assert dtype == native
    assert why.endswith(f"a GGUF file's blocks run as stored on the CPU only, here as {native}")
    folder = registry.ModelEntry(id="dir", name="dir", source="folder", path="/nowhere")
    assert "GGUF" not in loader.pick_dtype_why(folder, "cuda", "auto")[1]


def test_a_spread_load_of_stored_weights_is_refused_in_one_line(tmp_path):
    """`auto` on a CPU may choose a GGUF's blocks as stored, which run on the CPU alone: a
    spread load said so with a KeyError from the map's bytes a weight."""
    from swiftwriter.modelstore import loader, registry
    from transformers import LlamaConfig

    LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=256).save_pretrained(tmp_path)  # fmt: skip
    entry = registry.ModelEntry(id="tiny", name="tiny", source="folder", path=str(tmp_path))
    spread = placement.Placement("cpu", "auto", {"cpu": 1 << 30})
    with pytest.raises(UserError, match="never spread"):
        loader.load_placed(entry, spread, dtype=loader.STORED)


def test_stored_weights_are_estimated_as_their_gguf_file_and_the_cache_they_keep(tmp_path):
    """The Models dialog's estimate for "stored": the file's blocks and the KV cache such a
    model keeps on this CPU (bfloat16 with AVX-512 BF16, else float32), on the CPU (it was
    described as bfloat16 weights, which a stored model never holds)."""
    from transformers import LlamaConfig

    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=256)  # fmt: skip
    config.save_pretrained(tmp_path)
    kv = placement.kv_bytes_per_token(config, placement.stored_cache_dtype()) * 4096
    text = placement.describe(tmp_path, "cpu", "stored", 4096, gguf_bytes=5000)
    assert text.startswith("stored, 4,096 tokens of context, cpu: ")
    assert f"4.9 KiB weights (the GGUF file) + {placement.fmt_bytes(kv)} KV cache" in text
    assert "CPU alone" in placement.describe(tmp_path, "cuda", "stored", 4096, gguf_bytes=5000)
    assert "Only a GGUF" in placement.describe(tmp_path, "cpu", "stored", 4096)


def test_a_stored_models_cache_is_bfloat16_where_the_cpu_has_avx512_bf16():
    """What the lean pass keeps (leanpass._attention_dtype) is what the estimates count."""
    assert placement.stored_cache_dtype("flags : fpu avx512f avx512_bf16 avx512_vnni") == "bfloat16"
    assert placement.stored_cache_dtype("flags : fpu avx2 fma") == "float32"
    assert placement.stored_cache_dtype("") == "float32"

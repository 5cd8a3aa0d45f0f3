"""Weights kept in the GGUF file's blocks (engine/passes/quant.py, quant_linear.cpp): every type
de-quantizes exactly as the gguf package does, a row's product is the same bits whatever else
the pass holds (1 to 64 rows, other rows random) on every path this machine runs, the paths
agree with each other, and speculation on a model built from a GGUF of each type writes plain
decoding's text, greedy and sampled."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, quants
from swiftwriter.engine.passes import QUANT_TYPES, QuantLinear, QuantWeight, merge_projections
from swiftwriter.engine.passes import quant as quant_mod

pytestmark = pytest.mark.skipif(not quant_mod.available(), reason="no C++ compiler here")

TYPES = list(QUANT_TYPES)
K = 512  # two super-blocks of the K types, 16 blocks of the others


def fp16_bytes(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float16).view(np.uint8).reshape(*values.shape, 2)


def random_blocks(kind: str, rows: int, k: int = K, seed: int = 0) -> np.ndarray:
    """Random stored blocks whose scales are finite: random codes cover every value, and the
    scales include the largest and a subnormal float16."""
    rng = np.random.default_rng(seed)
    qtype = QUANT_TYPES[kind]
    per = quant_mod.block_size(qtype)
    _, _, _, size = quant_mod.group_spec(qtype)
    raw = rng.integers(0, 256, size=(rows, k // per, size), dtype=np.uint8)
    scales = rng.uniform(1e-3, 2e-2, size=(rows, k // per)) * rng.choice([-1, 1], (rows, k // per))
    scales.flat[0], scales.flat[1] = 65504.0, 6e-8  # float16's largest, and a subnormal
    offsets = {"Q4_0": [0], "Q8_0": [0], "Q4_1": [0, 2], "Q4_K": [0, 2], "Q5_K": [0, 2],
               "Q6_K": [208]}[kind]  # fmt: skip
    for at in offsets:
        raw[..., at : at + 2] = fp16_bytes(scales)
    return raw.reshape(rows, -1)


@pytest.mark.parametrize("kind", TYPES)
def test_dequantization_matches_gguf_bit_for_bit(kind):
    raw = random_blocks(kind, rows=37)  # not a whole number of 16-row tiles
    weight = QuantWeight.from_blocks(raw, QUANT_TYPES[kind], K)
    want = quants.dequantize(raw, GGMLQuantizationType[kind]).reshape(37, K)
    got = weight.dense().numpy()
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("path", ["scalar", "best"])
@pytest.mark.parametrize("kind", TYPES)
def test_a_rows_product_is_the_same_whatever_shares_the_pass(kind, path):
    weight = QuantWeight.from_blocks(random_blocks(kind, rows=48), QUANT_TYPES[kind], K)
    gen = torch.Generator().manual_seed(QUANT_TYPES[kind])
    row = torch.randn(1, K, generator=gen)
    alone = weight.linear(row, path=path)
    for rows in (1, 2, 3, 5, 8, 9, 16, 17, 33, 64):
        batch = torch.randn(rows, K, generator=gen) * 3
        at = rows // 2
        batch[at] = row[0]
        out = weight.linear(batch, path=path)
        assert torch.equal(out[at], alone[0]), (rows, path)


@pytest.mark.parametrize("kind", TYPES)
def test_every_path_this_machine_runs_gives_the_same_bits(kind):
    weight = QuantWeight.from_blocks(random_blocks(kind, rows=40, seed=3), QUANT_TYPES[kind], K)
    x = torch.randn(11, K, generator=torch.Generator().manual_seed(5))
    paths = {
        name: code for name, code in quant_mod.PATHS.items() if code in quant_mod.kernel().paths()
    }
    assert "scalar" in paths and len(paths) >= 2
    outs = {name: weight.linear(x, path=name) for name in paths}
    for name, out in outs.items():
        assert torch.equal(out, outs["scalar"]), name
    bf16 = weight.linear(x.bfloat16(), float_out=True)
    assert torch.equal(bf16, weight.linear(x.bfloat16().float(), float_out=True))


@pytest.mark.parametrize("kind", TYPES)
def test_the_product_is_the_weights_product_within_the_inputs_rounding(kind):
    """Inputs are rounded to 8 bits per block, as llama.cpp rounds them: within 2% of the
    exact product over the de-quantized weights."""
    weight = QuantWeight.from_blocks(random_blocks(kind, rows=64, seed=4), QUANT_TYPES[kind], K)
    x = torch.randn(6, K, generator=torch.Generator().manual_seed(6))
    exact = x.double() @ weight.dense().double().T
    got = weight.linear(x).double()
    assert float((got - exact).norm() / exact.norm()) < 0.02


def quantized_by_hand(x: np.ndarray, group: int, sum_span: int):
    """llama.cpp's input rounding written out: d = max |x| / 127 per group (NaN ignored),
    q = x * (1 / d) rounded half away from zero, clamped to +-127, NaN as 0; the sums per span."""
    rows = x.shape[0]
    xg = x.reshape(rows, -1, group).astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        amax = np.where(np.isnan(xg), np.float32(0), np.abs(xg)).max(-1)
        d = (amax / np.float32(127)).astype(np.float32)
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
        v = (xg * inv[..., None]).astype(np.float32)
        r = np.trunc(v)
        r = np.where(np.abs(v - r) >= 0.5, r + np.sign(v), r)
        r = np.where(np.isnan(r), 0, np.clip(r, -127, 127))
    q = r.astype(np.int8).reshape(rows, -1)
    sums = q.astype(np.int32).reshape(rows, -1, sum_span).sum(-1)
    return q, d.reshape(rows, -1), sums


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kind", ["Q4_1", "Q6_K"])
def test_inputs_are_rounded_as_llama_cpp_rounds_them(kind, dtype):
    """The kernel's input quantization (vectorised where the CPU allows) is the rounding written
    out by hand, bit for bit: halves away from zero (2.5 -> 3, where NumPy's rounding gives 2),
    NaN and infinity, an all-zero group, bfloat16 widened by its bits."""
    group, _, sum_span, _ = quant_mod.group_spec(QUANT_TYPES[kind])
    gen = torch.Generator().manual_seed(3)
    x = (
        torch.randn(5, K, generator=gen)
        * torch.logspace(-3, 3, K)[torch.randperm(K, generator=gen)]
    )
    halves = torch.tensor([0.5, 1.5, 2.5, -2.5, -0.5, 126.5, 3.0, -127.0])
    x[0, :group] = halves.repeat(group // 8)
    x[0, 0] = 127.0  # max |x| = 127: the scale is 1 and the halves stay halves
    x[1, :group] = 0.0
    x[2, 3], x[2, group + 1] = float("nan"), float("inf")
    x = x.to(dtype)
    q, d, sums = quant_mod.kernel().quantize(x, QUANT_TYPES[kind])
    want_q, want_d, want_s = quantized_by_hand(x.float().numpy(), group, sum_span)
    assert q[0, 1:4].tolist() == [2, 3, -3]  # 1.5, 2.5, -2.5: each away from zero
    assert np.array_equal(q.numpy(), want_q)
    assert np.array_equal(d.numpy().view(np.uint32), want_d.view(np.uint32))
    assert np.array_equal(sums.numpy(), want_s)


@pytest.mark.parametrize("kind", ["Q4_1", "Q6_K"])
def test_rows_taken_and_joined_keep_their_bits(kind):
    raw = random_blocks(kind, rows=45, seed=8)
    whole = QuantWeight.from_blocks(raw, QUANT_TYPES[kind], K)
    order = [44, 3, 3, 17, 0, 31]
    taken = whole.take(order)
    assert torch.equal(
        taken.packed, QuantWeight.from_blocks(raw[order], QUANT_TYPES[kind], K).packed
    )
    parts = [
        QuantWeight.from_blocks(raw[a:b], QUANT_TYPES[kind], K)
        for a, b in ((0, 7), (7, 32), (32, 45))
    ]
    joined = QuantWeight.join(parts)
    assert joined.n == 45 and torch.equal(joined.packed, whole.packed)


# --- models built from GGUF files of each type ---------------------------------------------


def tiny_config():
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=256, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        bos_token_id=0, eos_token_id=1, tie_word_embeddings=False, rms_norm_eps=1e-5,
    )  # fmt: skip


def tiny_tensors(config, seed: int = 0):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)  # real preferences, as tests/conftest.py's models
    return [(name, t.detach().numpy()) for name, t in model.state_dict().items()]


_STORED: dict = {}


def stored_model(kind: str, tmp_path_factory):
    if kind not in _STORED:
        from swiftwriter.bench import ggufgen
        from swiftwriter.modelstore import gguf_weights

        config = tiny_config()
        path = tmp_path_factory.mktemp("gguf") / f"tiny-{kind}.gguf"
        ggufgen.write_llama(path, config, tiny_tensors(config), kind, lambda writer: None)
        model = gguf_weights.build(config, path, torch.float32).model
        merge_projections(model)
        _STORED[kind] = model
    return _STORED[kind]


@pytest.mark.parametrize("kind", TYPES)
def test_a_model_from_a_gguf_file_keeps_its_blocks(kind, tmp_path_factory):
    model = stored_model(kind, tmp_path_factory)
    layer = model.model.layers[0]
    assert isinstance(layer.self_attn.q_proj, QuantLinear)
    assert layer.self_attn.q_proj.qweight.name == kind
    assert isinstance(model.lm_head, QuantLinear)
    assert not any(p.numel() > 256 * 2 for p in model.parameters())  # no float weight matrix


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("kind", TYPES)
def test_tokenswift_on_stored_blocks_writes_plain_decodings_text(kind, tmp_path_factory):
    from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
    from swiftwriter.engine.decoding.history_source import HistorySource

    from tests.engine.wrong_source import WrongAndSlow

    model = stored_model(kind, tmp_path_factory)
    rng = random.Random(kind)
    prompt = [rng.randrange(2, 250) for _ in range(24)]
    drafting = DraftSettings(sources=("ngram", "suffix"), max_nodes=12, adaptive=False)

    def generate(sampling, drafting, sources=()):
        gen = Generator(model, sampling, drafting, sources=list(sources), calibrate=False)
        return [t for event in gen.generate(prompt, 48) for t in event.tokens], gen.stats

    greedy = SamplingSettings(greedy=True, penalty=1.1, window=64)
    sampled = SamplingSettings(greedy=False, penalty=1.1, window=64, min_p=0.05, seed=7)
    for sampling in (greedy, sampled):
        plain, _ = generate(sampling, DraftSettings.plain())
        history = prompt + plain[:30] + [rng.randrange(2, 250) for _ in range(24)]
        sources = [HistorySource(sequences=[history]), WrongAndSlow("wrong", delay=0.0)]
        got, stats = generate(sampling, drafting, sources)
        assert got == plain, sampling.greedy
        assert stats.accepted_drafts > 0, (sampling.greedy, "no speculation")


def test_a_stored_model_caches_keys_and_values_in_bfloat16_where_the_pairs_kernel_runs(
    tmp_path_factory,
):
    """Its activations stay float32, but the cache it reads every step (as long as all its
    weight products at 1,000 tokens) is bfloat16 wherever the bfloat16 pairs kernel runs; the
    prompt written by transformers' own forward goes into the same bfloat16 buffers, and its
    attention reads them back in float32."""
    from swiftwriter.engine.passes import ModelRunner, native

    model = stored_model("Q4_0", tmp_path_factory)
    runner = ModelRunner(model)
    runner.prefill(list(range(5, 45)))
    layer = runner.cache.layers[0]
    pairs = native.tree_attention() is not None and native.pair_keys(torch.bfloat16, 64)
    want = torch.bfloat16 if pairs else torch.float32
    assert layer.keys.dtype == layer.values.dtype == want
    if native.tree_attention() is not None:  # what the memory estimates count is what it keeps
        from swiftwriter.modelstore import placement

        assert placement.stored_cache_dtype() == str(want).removeprefix("torch.")
    runner.time_pass(4)  # the lean pass appends to the same buffers
    assert layer.keys.dtype == want
    with torch.inference_mode():
        keys, values = layer.update(torch.ones(1, 2, 1, 64), torch.ones(1, 2, 1, 64))
    assert keys.dtype == values.dtype == torch.float32  # what transformers' attention is given


def test_a_take_on_stored_blocks_says_stored_not_float32(tmp_path_factory):
    """The stats (Speed dock, stored take, bench) name the loader's precision: a model on
    stored blocks computes its activations in float32, and once said "float32" beside auto's
    reason "measured ... vs float32"."""
    from swiftwriter.engine import DraftSettings, Generator, SamplingSettings

    model = stored_model("Q8_0", tmp_path_factory)
    sampling = SamplingSettings(greedy=True)
    gen = Generator(model, sampling, DraftSettings.plain(), calibrate=False)
    list(gen.generate([5, 6, 7], 2))
    assert gen.stats.dtype == "stored"


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("kind,pairs", [("Q4_1", True), ("Q6_K", True), ("Q4_K", False)])
def test_the_layer_stack_computes_the_per_layer_calls_bits(kind, pairs, tmp_path_factory,
                                                             monkeypatch):  # fmt: skip
    """A pass's layers in one native call (leanpass `FusedLayers._stacked`) give the bits of
    the per-layer calls it replaced: each row's final hidden state and the keys, values and
    key tiles written into every layer's cache, over tries of several shapes; on a bfloat16
    cache read as key pairs (where the CPU has AVX512-BF16) and on a float32 one (every CPU
    without it: here with the pairs switched off)."""
    from swiftwriter.engine.passes import ModelRunner, native
    from swiftwriter.engine.passes.tree import Trie

    if not pairs:
        monkeypatch.setenv(native.PAIRS_ENV, "0")
    model = stored_model(kind, tmp_path_factory)
    runners = {"stack": ModelRunner(model), "layers": ModelRunner(model)}
    fused = runners["stack"].backend.lean.fused
    assert native.tree_attention() is not None, native.unavailable()
    if pairs and not native.pair_keys(torch.bfloat16, 64):
        pytest.skip("this CPU has no AVX512-BF16 (the float32 case runs here)")
    assert fused is not None and fused.stack is not None
    want = torch.bfloat16 if pairs else torch.float32
    stack = fused.stack
    rng = random.Random(kind)
    prompt = [rng.randrange(2, 250) for _ in range(37)]
    for runner in runners.values():
        runner.prefill(prompt)
    for n in (1, 5, 1, 12, 3):
        parents = [-1] + [rng.randrange(i) for i in range(1, n)]
        depths = [0] * n
        for i in range(1, n):
            depths[i] = depths[parents[i]] + 1
        trie = Trie(tokens=[rng.randrange(2, 250) for _ in range(n)], parents=parents,
                    depths=depths, sources=[()] * n, ranks=[0] * n, probs=[1.0] * n)  # fmt: skip
        got = {}
        for name, runner in runners.items():
            runner.backend.lean.fused.stack = stack if name == "stack" else None
            runner.forward_trie(trie)
            got[name] = (runner._hidden.clone(), [runner.logits_at(i) for i in range(n)])
        assert torch.equal(got["stack"][0], got["layers"][0]), n
        rows = zip(got["stack"][1], got["layers"][1], strict=True)
        assert all(torch.equal(a, b) for a, b in rows), n
        caches = zip(runners["stack"].cache.layers, runners["layers"].cache.layers, strict=True)
        for mine, theirs in caches:
            assert mine.keys.dtype == want
            assert mine.length == theirs.length
            assert torch.equal(mine.keys, theirs.keys) and torch.equal(mine.values, theirs.values)
            assert torch.equal(mine.tiles(pairs), theirs.tiles(pairs))
        keep = [0] + [i for i in range(1, n) if parents[i] == 0][:1]
        for runner in runners.values():
            runner.compact(keep)
    runners["stack"].backend.lean.fused.stack = stack

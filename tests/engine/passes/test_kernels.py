"""The product kernel of the CPU passes is chosen by timing (engine/passes/kernels.py), and a chosen
kernel is the one every product of a pass and of the lm_head runs on."""

from __future__ import annotations

import pytest
import torch
from swiftwriter.engine.passes import kernels
from swiftwriter.engine.passes.leanpass import merge_projections
from swiftwriter.engine.passes.verify import ModelRunner

from tests.conftest import build_tiny
from tests.engine.passes.test_invariant import make_trie

STOCK = {1: 0.030, 2: 0.045, 8: 0.060}  # MKL off Intel: climbs with the row count


def test_onednn_is_chosen_when_padded_plain_decoding_loses_nothing_and_trees_get_cheaper():
    cheap = {1: 0.020, 2: 0.021, 8: 0.024}
    assert kernels.choose_kernel({"stock": STOCK, "onednn": cheap}) == kernels.ONEDNN
    # read back from JSON: string keys
    as_json = {
        k: {str(n): t for n, t in v.items()} for k, v in (("stock", STOCK), ("onednn", cheap))
    }
    assert kernels.choose_kernel(as_json) == kernels.ONEDNN


def test_stock_stays_when_onednn_would_slow_plain_decoding_or_trees_or_is_missing():
    dear_two = {1: 0.020, 2: 0.033, 8: 0.024}  # 2 rows (a padded one-token pass) > 1.05x stock
    assert kernels.choose_kernel({"stock": STOCK, "onednn": dear_two}) == kernels.STOCK
    dear_tree = {1: 0.020, 2: 0.021, 8: 0.061}
    assert kernels.choose_kernel({"stock": STOCK, "onednn": dear_tree}) == kernels.STOCK
    assert kernels.choose_kernel({"stock": STOCK}) == kernels.STOCK


def test_the_packed_layout_wins_when_it_is_cheapest_and_plain_decoding_loses_nothing():
    onednn = {1: 0.020, 2: 0.021, 8: 0.024}
    packed = {1: 0.012, 2: 0.013, 8: 0.014}
    times = {"stock": STOCK, "onednn": onednn, "onednn-packed": packed}
    assert kernels.choose_kernel(times) == kernels.PACKED
    times["onednn-packed"] = {1: 0.012, 2: 0.040, 8: 0.014}  # its padded one-token pass dearer
    assert kernels.choose_kernel(times) == kernels.ONEDNN


def test_timing_covers_every_kernel_and_row_count():
    model = build_tiny("llama", seed=3)
    times = kernels.time_kernels(model, rows=(1, 8), reps=1)
    usable = {k for k in ("stock", "onednn", "onednn-packed") if kernels.usable(k, torch.float32)}
    assert set(times) == usable
    assert all(set(t) == {1, 8} and min(t.values()) > 0 for t in times.values())
    own = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Linear)}
    assert not own & set(kernels._PACKS)  # the copies made for timing are gone


@pytest.mark.skipif(not kernels.packed_ok(), reason="this torch build cannot pack for oneDNN")
def test_a_packed_weight_is_made_once_and_again_after_an_in_place_change():
    weight = torch.randn(6, 4)
    x = torch.randn(3, 4)
    first = kernels.packed_weight(weight)
    assert kernels.packed_weight(weight) is first
    assert torch.allclose(kernels._packed(x, weight, None), x @ weight.T, atol=1e-5)
    with torch.no_grad():
        weight.mul_(2)
    assert kernels.packed_weight(weight) is not first
    assert torch.allclose(kernels._packed(x, weight, None), x @ weight.T, atol=1e-5)
    key = id(weight)
    del weight
    assert key not in kernels._PACKS  # dropped with its weight


@pytest.mark.parametrize("kernel", ["onednn", "onednn-packed"])
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_a_pass_on_a_onednn_kernel_runs_every_product_and_the_head_there(monkeypatch, arch, kernel):
    if not kernels.usable(kernel, torch.float32):
        pytest.skip(f"this torch build cannot run {kernel}")
    model = build_tiny(arch, seed=4)
    assert merge_projections(model) == model.config.num_hidden_layers  # as the loader lays it
    kernels.set_kernel(model, kernel)
    calls = []
    name = "_onednn" if kernel == kernels.ONEDNN else "_packed"
    real = getattr(kernels, name)

    def counted(x, w, b):
        calls.append(tuple(w.shape))
        return real(x, w, b)

    monkeypatch.setattr(kernels, name, counted)
    runner = ModelRunner(model)
    assert runner.invariant
    runner.prefill([5, 6, 7])
    calls.clear()
    runner.forward_trie(make_trie([8, 9, 10], [-1, 0, 1]))
    logits = runner.logits_at(0, None)
    layers = model.config.num_hidden_layers
    assert len(calls) == 4 * layers + 1  # qkv, o, gate/up, down per layer; the head
    assert calls[-1] == tuple(model.get_output_embeddings().weight.shape)
    assert torch.isfinite(logits).all()


def test_the_drafters_linears_take_the_faster_kernel_once(monkeypatch):
    from swiftwriter.engine.decoding.drafters import RecurrentDrafter

    module = RecurrentDrafter(32)
    x = torch.randn(3, 32)
    before = module(x, x)
    timed = []
    real = kernels.time_linears

    def faked(linears, rows, reps, among):
        timed.append(len(linears))
        times = real(linears, rows, 1, among)
        times[kernels.STOCK] = {n: 1.0 for n in rows}  # the stock kernel made slow
        if kernels.PACKED in times:
            times[kernels.PACKED] = {n: 2.0 for n in rows}  # and the packed one slower
        return times

    monkeypatch.setattr(kernels, "time_linears", faked)
    expected = kernels.ONEDNN if kernels.onednn_ok() else kernels.STOCK
    assert kernels.adopt_fastest(module) == expected
    assert kernels.adopt_fastest(module) == expected and timed == [4]  # timed once
    linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    assert all(isinstance(m, kernels.KernelLinear) and m.kernel == expected for m in linears)
    assert torch.allclose(module(x, x), before, atol=1e-5)


def test_a_model_without_linears_keeps_the_stock_kernel():
    times = kernels.time_linears([], rows=(1, 8))
    assert kernels.choose_kernel(times) == kernels.STOCK


def test_the_kernel_is_kept_per_model_and_a_deep_copy_starts_bare():
    """Kept in our own settings, not on the module: another model, or a deep copy of this one
    (the drafter's bfloat16 twin), has none chosen and will choose its own."""
    import copy

    from swiftwriter.engine.decoding.drafters import RecurrentDrafter
    from swiftwriter.engine.passes.modelstate import settings_for

    module, other = RecurrentDrafter(32), RecurrentDrafter(32)
    kernels.set_kernel(module, kernels.ONEDNN)
    twin = copy.deepcopy(module)
    assert kernels.kernel_of(module) == kernels.ONEDNN
    assert kernels.kernel_of(other) == kernels.kernel_of(twin) == kernels.STOCK
    assert settings_for(twin).kernel is None  # adopt_fastest will time it anew

"""The forest call of the tree-attention kernel (runs written together): each part's rows get
exactly the bits the kernel gives that part alone, while the shared prompt's keys are read
from the first part's buffers."""

from __future__ import annotations

import random

import pytest
import torch
from swiftwriter.engine.passes import native
from swiftwriter.engine.passes.invariant import PathTable
from swiftwriter.engine.passes.kvcache import GrowingLayer

HK, HQ, D = 3, 9, 64


def layer_with(keys: torch.Tensor, values: torch.Tensor) -> GrowingLayer:
    layer = GrowingLayer(initial_capacity=64)
    with torch.inference_mode():
        layer.update(keys[None], values[None])
        layer.tiles()
    return layer


def trie_mask(rng: random.Random, n: int) -> torch.Tensor | None:
    if n == 1:
        return None
    parents = [-1] + [rng.randrange(i) for i in range(1, n)]
    allowed = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        j = i
        while j >= 0:
            allowed[i, j] = True
            j = parents[j]
    return allowed


@pytest.mark.parametrize("seed", range(6))
def test_each_part_gets_the_bits_it_gets_alone(seed):
    kernel, forest = native.tree_attention(), native.forest_attention()
    if forest is None:
        pytest.skip(f"no native kernel here: {native.unavailable()}")
    rng = random.Random(seed)
    torch.manual_seed(seed)
    prompt = rng.choice([16, 150, 300, 451])  # slots the parts share, tiles or not
    shared = prompt // 16 * 16
    head_k, head_v = torch.randn(HK, prompt, D), torch.randn(HK, prompt, D)
    layers, tables, queries = [], [], []
    for _part in range(rng.choice([1, 2, 3])):
        own = rng.choice([0, 1, 17, 200])  # the part's own committed tokens
        n = rng.choice([1, 1, 4, 9])  # its trie rows in this pass
        keys = torch.cat([head_k, torch.randn(HK, own + n, D)], dim=1)
        values = torch.cat([head_v, torch.randn(HK, own + n, D)], dim=1)
        layers.append(layer_with(keys, values))
        tables.append(PathTable(trie_mask(rng, n), n, prompt + own))
        queries.append(torch.randn(n, HQ, D))
    scale = D**-0.5
    alone = [
        kernel(q, layer.tiles(), layer.value_buffer(), t.prefix, t.paths, t.lengths, scale)
        for q, layer, t in zip(queries, layers, tables, strict=True)
    ]
    depth = max(t.paths.shape[1] for t in tables)
    paths = torch.cat(
        [torch.nn.functional.pad(t.paths, (0, depth - t.paths.shape[1])) for t in tables]
    )
    together = forest(
        torch.cat(queries), layers[0].tiles(), layers[0].value_buffer(), shared,
        [layer.tiles() for layer in layers], [layer.value_buffer() for layer in layers],
        [t.prefix for t in tables], [t.n for t in tables], paths,
        torch.cat([t.lengths for t in tables]), scale,
    )  # fmt: skip
    assert torch.equal(together, torch.cat(alone))


def test_the_shared_keys_are_read_from_the_first_part():
    """A second part whose own copy of the prompt is wrong still gets the right result: the
    prompt's keys come from the first part's buffers (this is what saves the reads)."""
    forest = native.forest_attention()
    if forest is None:
        pytest.skip(f"no native kernel here: {native.unavailable()}")
    keys, values = torch.randn(HK, 64 + 5, D), torch.randn(HK, 64 + 5, D)
    good = layer_with(keys, values)
    spoilt_keys = keys.clone()
    spoilt_keys[:, :64] = 0.0
    spoilt = layer_with(spoilt_keys, values)
    table = PathTable(None, 1, 68)
    q = torch.randn(1, HQ, D)

    def call(second):
        return forest(
            torch.cat([q, q]), good.tiles(), good.value_buffer(), 64,
            [good.tiles(), second.tiles()], [good.value_buffer(), second.value_buffer()],
            [68, 68], [1, 1], torch.cat([table.paths, table.paths]),
            torch.cat([table.lengths, table.lengths]), D**-0.5,
        )  # fmt: skip

    out = call(spoilt)
    assert torch.equal(out[0], out[1])


def test_the_native_writer_writes_what_append_writes():
    """One new row per part, written natively, leaves each part's keys, values and key tiles
    as GrowingLayer.append leaves them."""
    writer = native.append_rows()
    if writer is None:
        pytest.skip(f"no native kernel here: {native.unavailable()}")
    made = [layer_with(torch.randn(HK, n, D), torch.randn(HK, n, D)) for n in (15, 16, 40)]
    copies = [layer_with(layer.keys[0].clone(), layer.values[0].clone()) for layer in made]
    k, v = torch.randn(3, HK, D), torch.randn(3, HK, D)
    with torch.inference_mode():
        for i, layer in enumerate(copies):
            layer.append(k[i : i + 1], v[i : i + 1])
        assert all(layer.room_for_one() for layer in made)
        keys, values, tiles = map(list, zip(*(layer.buffers() for layer in made), strict=True))
        writer(keys, values, tiles, [layer.length for layer in made], k, v)
        for layer in made:
            layer.length += 1
    for ours, theirs in zip(made, copies, strict=True):
        assert torch.equal(ours.keys, theirs.keys) and torch.equal(ours.values, theirs.values)
        blocks = -(-ours.length // 16)
        assert torch.equal(ours.tiles()[:, :blocks], theirs.tiles()[:, :blocks])


def test_the_bfloat16_writer_writes_what_append_writes_after_a_cast():
    """A stored-block model's rows (float32) written natively into a bfloat16 cache leave its
    keys, values and key pair tiles as a cast and GrowingLayer.append leave them: PyTorch's
    rounding (to nearest, ties to even: 1 + 2^-8 goes to 1, 1 + 3 * 2^-8 up), rows that
    cross a tile, rows that need the buffers grown, a cache with no tiles yet."""
    writer = native.append_bf16()
    if writer is None:
        pytest.skip(f"no native kernel here: {native.unavailable()}")

    def bf16_layer(n: int, tiles: bool) -> GrowingLayer:
        layer = GrowingLayer(initial_capacity=64, dtype=torch.bfloat16)
        with torch.inference_mode():
            layer.update(torch.randn(1, HK, n, D), torch.randn(1, HK, n, D))
            if tiles:
                layer.tiles(pairs=True)
        return layer

    for have, new, tiles in (
        (15, 1, True),
        (16, 3, True),
        (40, 17, True),
        (60, 9, True),
        (5, 4, False),
    ):
        made = bf16_layer(have, tiles)
        copy = GrowingLayer(initial_capacity=64, dtype=torch.bfloat16)
        with torch.inference_mode():
            copy.update(made.keys.float(), made.values.float())
            if tiles:
                copy.tiles(pairs=True)
        k, v = torch.randn(new, HK, D), torch.randn(new, HK, D)
        k[0, 0, :2] = torch.tensor([1 + 2**-8, 1 + 3 * 2**-8])  # ties: down to even, up to even
        with torch.inference_mode():
            copy.append(k.to(torch.bfloat16), v.to(torch.bfloat16))
            if not made.room_for(new):
                made.make_room(k.transpose(0, 1)[None], v.transpose(0, 1)[None])
            writer(*made.buffers(), made.length, k, v)
            made.length += new
        assert made.keys.dtype == torch.bfloat16
        assert torch.equal(made.keys, copy.keys) and torch.equal(made.values, copy.values)
        assert made.keys[0, 0, have, :2].tolist() == [1.0, 1 + 2**-6]
        blocks = -(-made.length // 16)
        assert torch.equal(made.tiles(True)[:, :blocks], copy.tiles(True)[:, :blocks])

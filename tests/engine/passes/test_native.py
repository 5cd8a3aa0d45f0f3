"""The native tree-attention kernel: each row's result is a function of its own keys alone (a
trie row gets, bit for bit, what the one-token pass over the same keys gets), it agrees with
PyTorch's attention, the cache keeps its key tiles in step with every write, and without the
kernel the passes fall back to PyTorch's attention and stay exact."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from swiftwriter.engine.passes import native
from swiftwriter.engine.passes.invariant import PathTable
from swiftwriter.engine.passes.kvcache import GrowingLayer
from swiftwriter.engine.passes.leanpass import LeanDecoder, use_tree_attention

from tests.conftest import build_tiny

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# (dtype, keys as bfloat16 pairs): the pair layout where this CPU has AVX512-BF16
PAIRS = native.pair_build()
LAYOUTS = [(dtype, False) for dtype in DTYPES] + ([(torch.bfloat16, True)] if PAIRS else [])


@pytest.fixture(scope="module")
def kernel():
    fn = native.tree_attention()
    assert fn is not None, f"the kernel did not build here: {native.unavailable()}"
    return fn


def random_tree(rng: random.Random, n: int) -> torch.Tensor:
    """An ancestor mask (each row sees itself and its ancestors; parents first)."""
    allowed = torch.zeros(n, n, dtype=torch.bool)
    for row in range(n):
        parent = rng.randrange(row) if row else -1
        allowed[row, row] = True
        if parent >= 0:
            allowed[row] |= allowed[parent]
    return allowed


def cache_with(keys: torch.Tensor, values: torch.Tensor) -> GrowingLayer:
    layer = GrowingLayer(initial_capacity=8)
    layer.update(keys[None], values[None])
    return layer


def run_kernel(kernel, q, layer, table, scale=0.25, pairs=False):
    return kernel(
        q, layer.tiles(pairs), layer.value_buffer(), table.prefix, table.paths, table.lengths, scale
    )


@pytest.mark.parametrize("dtype,pairs", LAYOUTS)
@pytest.mark.parametrize("dim", [8, 40, 64, 80, 128])
@pytest.mark.parametrize("prefix", [1, 15, 16, 127, 128, 300])
def test_each_row_is_its_one_token_call_and_matches_attention(kernel, dtype, pairs, dim, prefix):
    rng = random.Random(prefix * 1000 + dim)
    gen = torch.Generator().manual_seed(prefix + dim)
    hk, g, n = 2, 3, rng.choice([2, 7, 19])
    allowed = random_tree(rng, n)
    keys = torch.randn(hk, prefix + n, dim, generator=gen).to(dtype)
    values = torch.randn(hk, prefix + n, dim, generator=gen).to(dtype)
    q = torch.randn(n, hk * g, dim, generator=gen).to(dtype)
    table = PathTable(allowed, n, prefix)
    tree = run_kernel(kernel, q, cache_with(keys, values), table, pairs=pairs)
    # bfloat16 pairs round the probabilities to bfloat16 (as PyTorch's bfloat16 attention does)
    atol, rtol = (2e-3, 1e-2) if pairs else (2e-5, 1e-4)
    for row in range(n):
        path = [prefix + int(s) for s in table.paths[row, : int(table.lengths[row])]]
        order = list(range(prefix)) + path
        # plain decoding's layout: the ancestors cached after the prefix, the row itself last
        alone = cache_with(keys[:, order], values[:, order])
        one = run_kernel(
            kernel, q[row : row + 1], alone, PathTable(None, 1, len(order) - 1), pairs=pairs
        )
        assert torch.equal(one[0], tree[row]), row
        want = F.scaled_dot_product_attention(
            q[row].float().view(1, hk * g, 1, dim),
            keys[:, order][None].float(),
            values[:, order][None].float(),
            scale=0.25,
            enable_gqa=True,
        )[0, :, 0]
        torch.testing.assert_close(tree[row], want, atol=atol, rtol=rtol)


@pytest.mark.parametrize("dtype,pairs", LAYOUTS)
def test_the_thread_count_changes_nothing(kernel, dtype, pairs):
    """Chunks spread over threads (the OpenMP build) but never split a row's sum."""
    rng = random.Random(5)
    gen = torch.Generator().manual_seed(5)
    prefix, n, hk, g, dim = 700, 12, 3, 3, 64
    keys = torch.randn(hk, prefix + n, dim, generator=gen).to(dtype)
    values = torch.randn(hk, prefix + n, dim, generator=gen).to(dtype)
    q = torch.randn(n, hk * g, dim, generator=gen).to(dtype)
    table = PathTable(random_tree(rng, n), n, prefix)
    layer = cache_with(keys, values)
    before = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            results.append(run_kernel(kernel, q, layer, table, pairs=pairs))
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(results[0], other) for other in results[1:])


@pytest.mark.parametrize("pairs", [False, True])
def test_the_cache_keeps_its_key_tiles_in_step_with_every_write(pairs):
    gen = torch.Generator().manual_seed(3)
    layer = GrowingLayer(initial_capacity=8)
    layer.update(torch.randn(1, 2, 5, 8, generator=gen), torch.randn(1, 2, 5, 8, generator=gen))
    layer.tiles(pairs)  # from here on every write updates the tiles
    with pytest.raises(ValueError):
        layer.tiles(not pairs)  # one layout per cache

    def check():
        want = native.key_tiles(layer.keys[0], pairs=pairs)
        got = layer.tiles(pairs)[:, : want.shape[1]]
        assert got.dtype == (torch.bfloat16 if pairs else torch.float32)
        for j in range(layer.length):  # the written slots (the rest is free room)
            assert torch.equal(got[:, j // 16, :, j % 16], want[:, j // 16, :, j % 16]), j

    layer.update(torch.randn(1, 2, 40, 8, generator=gen), torch.randn(1, 2, 40, 8, generator=gen))
    check()  # grown past the first capacity, a long write
    layer.write(7, torch.randn(2, 8, generator=gen), torch.randn(2, 8, generator=gen))
    check()
    layer.update(torch.randn(1, 2, 6, 8, generator=gen), torch.randn(1, 2, 6, 8, generator=gen))
    layer.write_rows(45, torch.randn(6, 2, 8, generator=gen), torch.randn(6, 2, 8, generator=gen))
    check()
    layer.keep(30, torch.tensor([1, 4, 9, 20]))
    assert layer.length == 34
    check()


def test_path_table_lists_each_rows_path_root_first():
    allowed = torch.tensor(
        [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 1, 1]], dtype=torch.bool
    )
    table = PathTable(allowed, 4, 10)
    assert table.lengths.tolist() == [1, 2, 2, 3]
    assert [table.paths[r, : table.lengths[r]].tolist() for r in range(4)] == [
        [0],
        [0, 1],
        [0, 2],
        [0, 2, 3],
    ]


def test_decoders_use_the_kernel_unless_told_not_to(kernel, monkeypatch):
    model = build_tiny()
    assert LeanDecoder(model).tree_attention is kernel
    use_tree_attention(model, False)
    assert LeanDecoder(model).tree_attention is None
    use_tree_attention(model, True)
    monkeypatch.setenv(native.DISABLE_ENV, "0")
    assert native.tree_attention() is None and "switched off" in native.unavailable()
    assert LeanDecoder(model).tree_attention is None


def test_a_failed_build_falls_back_with_its_reason(monkeypatch):
    monkeypatch.setattr(native, "_loaded", {})

    def no_compiler():
        raise OSError("no C++ compiler found")

    monkeypatch.setattr(native, "_build", no_compiler)
    assert native.tree_attention() is None
    assert "no C++ compiler" in native.unavailable()
    model = build_tiny()
    assert LeanDecoder(model).tree_attention is None  # the passes use PyTorch's attention


def test_without_openmp_the_kernel_is_built_serial(monkeypatch):
    builds = []

    def build_with(cflags, ldflags, source=native.SOURCE):
        builds.append(list(cflags))
        if native.OPENMP[0] in cflags:
            raise OSError("omp.h: no such file")
        return "serial module"

    monkeypatch.setattr(native, "_build_with", build_with)
    assert native._build() == "serial module"
    assert builds == [[*native.FLAGS, *native.OPENMP], list(native.FLAGS)]
    assert native._name(list(native.FLAGS)) != native._name([*native.FLAGS, *native.OPENMP])


def test_a_build_leaves_the_next_builds_name_alone(monkeypatch, tmp_path):
    """PyTorch's builder appends its own flags to the lists it is given: once those were ours,
    the next kernel built in the process got another name than the cache's (built again each
    start), and a planted build was looked for under the wrong name."""
    import torch.utils.cpp_extension as cpp

    def lengthening_load(name, sources, extra_cflags, extra_ldflags, **kwargs):
        extra_cflags.append("-DBUILDER_OWN")
        extra_ldflags.append("-lbuilder_own")
        Path(kwargs["build_directory"], f"{name}.so").write_bytes(b"built")
        return name

    monkeypatch.setenv("SWIFTWRITER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cpp, "load", lengthening_load)
    before = native._name([*native._flags(), *native.OPENMP])
    assert native._build_threaded(native.SOURCE) == before
    assert native._name([*native._flags(), *native.OPENMP]) == before


@pytest.mark.skipif(not PAIRS, reason="this CPU has no AVX512-BF16")
def test_bfloat16_decoders_read_key_pairs_unless_told_not_to(kernel, monkeypatch):
    model = build_tiny().to(torch.bfloat16)
    assert LeanDecoder(model).pair_keys
    assert not LeanDecoder(build_tiny()).pair_keys  # float32 keeps its float tiles
    with_pairs = native.identity()
    monkeypatch.setenv(native.PAIRS_ENV, "0")
    assert not LeanDecoder(model).pair_keys
    assert native.identity() != with_pairs  # pass timings are measured again


def _cpu_has(flag: str) -> bool:
    return flag in native._cpu_flags().split()


@pytest.mark.skipif(not (PAIRS and _cpu_has("amx_bf16")), reason="this CPU has no AMX")
def test_on_a_cpu_with_amx_the_pairs_are_summed_by_tiles(kernel):
    # the rows' sums then cost little more for eight rows than for one (bench --verify-curve);
    # exactness is the same test as every layout's (test_each_row_is_its_one_token_call...)
    assert native.tiles()
    assert native.identity().endswith("+amx")


def test_the_amx_switch_builds_another_kernel(monkeypatch):
    with_tiles = native._name()
    monkeypatch.setenv(native.AMX_ENV, "0")
    assert "-DSW_NO_AMX" in native._flags()
    assert native._name() != with_tiles  # its own build, and its own measured pass costs

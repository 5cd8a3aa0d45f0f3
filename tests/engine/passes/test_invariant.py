"""Batch invariance: a trie node's logits in a verification pass equal, bit for bit, what the
one-token pass computes for the same token after the same prefix, in float32, bfloat16 and
float16, whatever the trie's shape, its size and the prefix length; so greedy speculation
writes plain decoding's text token for token, and sampled speculation the same text for the
same seed, in every dtype. With the invariance switched off, bfloat16 rows differ."""

from __future__ import annotations

import random

import pytest
import torch
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.history_source import HistorySource
from swiftwriter.engine.decoding.settings import ContextSettings
from swiftwriter.engine.decoding.trie import Trie
from swiftwriter.engine.passes import kernels
from swiftwriter.engine.passes.invariant import PathPlan, RowClasses, attend_paths
from swiftwriter.engine.passes.kvcache import GrowingLayer
from swiftwriter.engine.passes.leanpass import use_tree_attention
from swiftwriter.engine.passes.verify import ModelRunner

from tests.conftest import build_tiny
from tests.engine.decoding.test_exactness import repetitive_prompt

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
ARCHS = ["llama", "qwen2"]
# every product kernel the loader may choose here, per dtype (engine/passes/kernels.py)
KERNELS = {
    d: [k for k in (kernels.STOCK, kernels.ONEDNN, kernels.PACKED) if kernels.usable(k, d)]
    for d in DTYPES
}


@pytest.fixture(
    scope="module",
    params=[(a, d, k) for a in ARCHS for d in DTYPES for k in KERNELS[d]],
    ids=str,
)
def model(request):
    arch, dtype, kernel = request.param
    model = build_tiny(arch, seed=11 if arch == "llama" else 12).to(dtype)
    kernels.set_kernel(model, kernel)
    return model


def make_trie(tokens: list[int], parents: list[int]) -> Trie:
    depths, children = [], [{} for _ in tokens]
    for i, p in enumerate(parents):
        depths.append(0 if p < 0 else depths[p] + 1)
        if p >= 0:
            children[p][tokens[i]] = i
    n = len(tokens)
    return Trie(tokens, parents, depths, [()] * n, [0] * n, [1.0] * n, children)


def random_trie(rng: random.Random, root: int, size: int, shape: str) -> Trie:
    """Chains, stars and random branching tries; siblings carry distinct tokens."""
    tokens, parents = [root], [-1]
    for i in range(1, size):
        if shape == "chain":
            parent = i - 1
        elif shape == "star":
            parent = 0
        else:
            parent = rng.randrange(i)
        used = {tokens[j] for j in range(i) if parents[j] == parent}
        token = rng.choice([t for t in range(2, 250) if t not in used])
        tokens.append(token)
        parents.append(parent)
    return make_trie(tokens, parents)


def one_token_logits(model, prefix: list[int], path: list[int]) -> list[torch.Tensor]:
    """Plain decoding's logits after each token of prefix[-1:] + path (one token per pass)."""
    runner = ModelRunner(model)
    runner.prefill(prefix[:-1])
    out = []
    for token in [prefix[-1], *path]:
        runner.forward_trie(make_trie([token], [-1]))
        out.append(runner.logits_at(0).clone())
        runner.compact([0])
    return out


def leaves(trie: Trie) -> list[int]:
    return [i for i in range(len(trie)) if not trie.children[i]]


def path_nodes(trie: Trie, node: int) -> list[int]:
    out = []
    while node > 0:
        out.append(node)
        node = trie.parents[node]
    return out[::-1]


def check_tree(model, prefix: list[int], trie: Trie, invariant: bool = True) -> int:
    """Number of trie nodes whose logits differ from the one-token pass."""
    runner = ModelRunner(model, invariant=invariant)
    assert runner.invariant == invariant
    runner.prefill(prefix[:-1])
    runner.forward_trie(trie)
    tree = {i: runner.logits_at(i, trie).clone() for i in range(len(trie))}
    bad, checked = 0, set()
    for leaf in leaves(trie):
        nodes = [0, *path_nodes(trie, leaf)]
        plain = one_token_logits(model, prefix, [trie.tokens[i] for i in nodes[1:]])
        for node, logits in zip(nodes, plain, strict=True):
            if node not in checked:
                checked.add(node)
                bad += not torch.equal(tree[node], logits)
    assert checked == set(range(len(trie)))
    return bad


@pytest.mark.parametrize("prefix_len", [1, 37, 250, 255, 256, 300, 530])
def test_tree_rows_equal_one_token_passes(model, prefix_len):
    rng = random.Random(prefix_len)
    prefix = [rng.randrange(2, 250) for _ in range(prefix_len)]
    for shape in ("chain", "star", "random"):
        size = rng.choice([2, 5, 9, 17, 33])
        trie = random_trie(rng, prefix[-1], size, shape)
        assert check_tree(model, prefix, trie) == 0, (shape, size)


@pytest.mark.parametrize("dtype", DTYPES)
def test_without_the_native_kernel_rows_still_equal_one_token_passes(dtype):
    """PyTorch's attention, one call per row (where the tree-attention kernel cannot build)."""
    model = build_tiny("llama", seed=11).to(dtype)
    use_tree_attention(model, False)
    assert ModelRunner(model).backend.lean.tree_attention is None
    rng = random.Random(9)
    for prefix_len in (37, 256):
        prefix = [rng.randrange(2, 250) for _ in range(prefix_len)]
        for shape in ("chain", "random"):
            trie = random_trie(rng, prefix[-1], 9, shape)
            assert check_tree(model, prefix, trie) == 0, (prefix_len, shape)


def test_rows_stay_exact_after_compaction(model):
    """Accept a branch (non-contiguous compaction), then verify another trie on top of it."""
    rng = random.Random(5)
    prefix = [rng.randrange(2, 250) for _ in range(60)]
    trie = random_trie(rng, prefix[-1], 12, "random")
    deepest = max(range(len(trie)), key=lambda i: trie.depths[i])
    kept = [0, *path_nodes(trie, deepest)]
    assert kept != list(range(len(kept))), "the test needs a non-contiguous path"
    runner = ModelRunner(model)
    runner.prefill(prefix[:-1])
    runner.forward_trie(trie)
    runner.compact(kept)
    accepted = [trie.tokens[i] for i in kept[1:]]
    second = random_trie(rng, rng.randrange(2, 250), 9, "random")
    runner.forward_trie(second)
    for leaf in leaves(second):
        nodes = [0, *path_nodes(second, leaf)]
        # plain decoding: the prompt's last token, the accepted tokens, then this path
        plain = one_token_logits(model, prefix, [*accepted, *(second.tokens[i] for i in nodes)])
        for node, logits in zip(nodes, plain[len(accepted) + 1 :], strict=True):
            assert torch.equal(runner.logits_at(node, second), logits), node


def test_switching_invariance_off_breaks_bfloat16():
    """The same check on the earlier passes: some tree rows round differently in bfloat16,
    so the test above can fail."""
    model = build_tiny("llama", seed=11).to(torch.bfloat16)
    rng = random.Random(3)
    bad = 0
    for prefix_len in (40, 200, 300):
        prefix = [rng.randrange(2, 250) for _ in range(prefix_len)]
        trie = random_trie(rng, prefix[-1], 17, "random")
        bad += check_tree(model, prefix, trie, invariant=False)
    assert bad > 0


def generate(model, prompt, n, sampling, drafting=None, **kw):
    gen = Generator(model, sampling, drafting, **kw)
    out = []
    for event in gen.generate(prompt, n):
        out.extend(event.tokens)
    return out, gen.stats


@pytest.fixture(scope="module")
def drafter(request):
    """A recurrent drafter trained for a few steps on the fp32 tiny Llama's own text."""
    from swiftwriter.training.features import extract_rows
    from swiftwriter.training.train import TrainSettings, train

    from tests.training.test_drafters import own_text

    base = build_tiny("llama", seed=11)
    rows = own_text(base, rows=8, length=64)
    data = extract_rows(base, rows)
    data["tokens"] = rows
    settings = TrainSettings(kind="recurrent", steps=30, batch=64, draft_vocab=256, warmup=3)
    tmp = request.getfixturevalue("tmp_path_factory").mktemp("drafter")
    return train(base, "tiny", data, tmp / "d", settings)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_greedy_tokenswift_equals_plain_decoding_with_every_source(dtype, drafter):
    model = build_tiny("llama", seed=11).to(dtype)
    rng = random.Random(str(dtype))
    prompt = repetitive_prompt(rng, 250, 120)
    history = [repetitive_prompt(rng, 250, 200)]
    plain = DraftSettings.plain()
    cases = [
        (SamplingSettings(penalty=1.2, window=64), DraftSettings(adaptive=False)),
        (SamplingSettings(penalty=1.0), DraftSettings(sources=("ngram",), adaptive=False)),
        (SamplingSettings(penalty=1.1, window=32, dry_multiplier=0.8), DraftSettings()),
        (SamplingSettings(penalty=1.2), DraftSettings(sources=("heads", "suffix"))),
    ]
    accepted = 0
    for sampling, drafting in cases:
        ref, _ = generate(model, prompt, 300, sampling, plain)
        got, stats = generate(
            model,
            prompt,
            300,
            sampling,
            drafting,
            drafter=drafter,
            sources=[HistorySource(sequences=history)],
        )
        assert got == ref, (sampling, drafting.sources)
        accepted += stats.accepted_drafts
    assert accepted > 0, "no draft was ever accepted: speculation was not exercised"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_sliding_window_and_sampling_stay_identical(dtype):
    model = build_tiny("qwen2", seed=12, max_positions=300).to(dtype)
    rng = random.Random(9)
    prompt = repetitive_prompt(rng, 250, 200)
    slide = ContextSettings(policy="slide", sink=8, keep=0.6)
    greedy = SamplingSettings(penalty=1.15, window=48)
    ref, ref_stats = generate(model, prompt, 320, greedy, DraftSettings.plain(), context=slide)
    got, stats = generate(model, prompt, 320, greedy, DraftSettings(adaptive=False), context=slide)
    assert got == ref and stats.shifts > 0 and stats.accepted_drafts > 0
    # sampled: a 16-id vocabulary repeats itself, so drafts are accepted under sampling too
    small = build_tiny("llama", vocab=16, seed=3, max_positions=300).to(dtype)
    prompt = [3, 7, 3, 7, 5, 9, 3, 7, 5] * 4
    sampled = SamplingSettings(greedy=False, penalty=1.2, window=64, min_p=0.1, seed=4)
    ref, _ = generate(small, prompt, 400, sampled, DraftSettings.plain(), context=slide)
    got, stats = generate(small, prompt, 400, sampled, DraftSettings(adaptive=False), context=slide)
    assert got == ref and stats.accepted_drafts > 0 and stats.shifts > 0


def test_path_plan_lays_out_each_rows_path_right_after_the_prefix():
    """Replaying the plan's writes over the pass's slots: when a row attends, the slots after
    the prefix hold exactly its root-to-row path, every row attends once, and rows that
    already see their path in place cost no write (a chain needs none)."""
    rng = random.Random(8)
    for shape in ("chain", "star", "random", "random"):
        trie = random_trie(rng, 5, rng.choice([2, 9, 40]), shape)
        plan = PathPlan(trie.ancestor_mask() if len(trie) > 1 else None, len(trie), 100)
        slots = list(range(len(trie)))
        seen = []
        for row, length, writes in plan.steps:
            for slot, source in writes:
                slots[slot] = source
            path = [0, *path_nodes(trie, row)]
            assert length == 100 + len(path)
            assert slots[: len(path)] == path
            seen.append(row)
        assert sorted(seen) == list(range(len(trie)))
        if shape == "chain":
            assert not plan.rewrites


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_rows_attention_is_the_one_token_call_over_its_path(dtype):
    """attend_paths on a cache holding a trie after the prefix gives each row, bit for bit,
    the attention of a one-token pass whose cache holds the prefix and then the row's path;
    afterwards the trie's slots are back in row order (what compaction reads)."""
    gen = torch.Generator().manual_seed(0)
    hk, g, d, prefix = 3, 3, 64, 300  # the default model's attention shapes
    trie = random_trie(random.Random(4), 5, 12, "random")
    n = len(trie)
    keys = torch.randn(prefix + n, hk, d, generator=gen).to(dtype)
    values = torch.randn(prefix + n, hk, d, generator=gen).to(dtype)
    q = torch.randn(n, hk * g, d, generator=gen).to(dtype)

    def layer_with(rows):
        layer = GrowingLayer(initial_capacity=64)
        layer.update(keys[rows].transpose(0, 1)[None], values[rows].transpose(0, 1)[None])
        return layer

    pass_layer = layer_with(list(range(prefix + n)))
    plan = PathPlan(trie.ancestor_mask(), n, prefix)
    got = attend_paths(q, keys[prefix:], values[prefix:], pass_layer, plan, 0.125)
    assert torch.equal(pass_layer.keys[0].transpose(0, 1), keys)
    assert torch.equal(pass_layer.values[0].transpose(0, 1), values)
    for row in range(n):
        path = [prefix + i for i in (0, *path_nodes(trie, row))]
        plain_layer = layer_with(list(range(prefix)) + path)
        want = attend_paths(
            q[row : row + 1],
            keys[path[-1:]],
            values[path[-1:]],
            plain_layer,
            PathPlan(None, 1, prefix + len(path) - 1),
            0.125,
        )
        assert torch.equal(got[row], want[0]), row


@pytest.mark.parametrize(
    ("low", "high", "n", "padded"),
    [(1, 27, 1, 1), (2, 16, 1, 2), (2, 16, 16, 16), (2, 16, 33, 33), (5, 8, 9, 10), (5, 8, 3, 5)],
)
def test_row_classes_pad_and_split_inside_the_class(low, high, n, padded):
    classes = RowClasses(low, high)
    assert classes.padded(n) == padded
    pieces = classes.chunks(padded)
    assert pieces[0][0] == 0 and pieces[-1][1] == padded
    assert all(low <= b - a <= high for a, b in pieces)
    assert all(a == prev[1] for prev, (a, _) in zip(pieces, pieces[1:], strict=False))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_tree_rows_equal_one_token_passes_on_cuda(dtype):
    model = build_tiny("llama", seed=11).to("cuda", dtype)
    rng = random.Random(1)
    for prefix_len in (40, 300):
        prefix = [rng.randrange(2, 250) for _ in range(prefix_len)]
        trie = random_trie(rng, prefix[-1], 17, "random")
        assert check_tree(model, prefix, trie) == 0


def test_the_root_brings_its_first_descendants_in_one_head_call():
    """A step whose first draft is right reads the head once: the root's call also computes
    its children and theirs (breadth first, `ROOT_ROWS`), each row as a one-token pass would;
    a node past them costs one more call, for its own subtree."""
    from swiftwriter.engine.passes import verify

    model = build_tiny("llama", seed=11).to(torch.bfloat16)
    rng = random.Random(6)
    prefix = [rng.randrange(2, 250) for _ in range(80)]
    trie = random_trie(rng, prefix[-1], verify.ROOT_ROWS + 8, "chain")
    runner = ModelRunner(model)
    calls = []
    rows_of = runner.logits_rows
    runner.logits_rows = lambda rows: calls.append(list(rows)) or rows_of(rows)
    runner.prefill(prefix[:-1])
    runner.forward_trie(trie)
    walk = [runner.logits_at(i, trie).clone() for i in range(verify.ROOT_ROWS)]
    assert calls == [list(range(verify.ROOT_ROWS))]
    runner.logits_at(verify.ROOT_ROWS, trie)
    assert len(calls) == 2 and calls[1][0] == verify.ROOT_ROWS
    plain = one_token_logits(model, prefix, trie.tokens[1 : verify.ROOT_ROWS])
    for node, logits in enumerate(plain):
        assert torch.equal(walk[node], logits), node

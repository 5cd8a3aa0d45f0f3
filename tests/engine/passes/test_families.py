"""Every decoder family writers use runs the lean batch-invariant pass: it computes what the
family's own transformers forward computes (within rounding), every tree row exactly what the
one-token pass computes (bit for bit, bfloat16), and speculation writes plain decoding's text
token for token in float32, bfloat16 and float16, greedy and sampled, with drafts accepted
from trees that branch. Tiny random models of each family (tests/engine/families.py)."""

from __future__ import annotations

import random

import pytest
import torch
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.history_source import HistorySource
from swiftwriter.engine.passes import backends
from swiftwriter.engine.passes.verify import ModelRunner

from tests.engine.families import FAMILIES, build_family
from tests.engine.passes.test_invariant import check_tree, make_trie, path_nodes, random_trie
from tests.engine.wrong_source import WrongAndSlow

NAMES = list(FAMILIES)
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
_MODELS: dict = {}


pytestmark = pytest.mark.usefixtures("one_thread")


def model_of(name: str, dtype=torch.float32):
    key = (name, dtype)
    if key not in _MODELS:
        _MODELS[key] = build_family(name, seed=NAMES.index(name)).to(dtype)
    return _MODELS[key]


@pytest.mark.parametrize("name", NAMES)
def test_the_family_runs_the_lean_invariant_pass(name):
    model = model_of(name)
    runner = ModelRunner(model)
    assert runner.backend.name == "lean" and runner.invariant
    assert backends.exactness(model) == ""


@pytest.mark.parametrize("name", NAMES)
def test_the_lean_pass_computes_what_the_familys_forward_computes(name):
    """Each node of a branching trie against transformers' full forward over prefix + path
    (a prefix longer than the sliding windows), and the stock pass over the same trie."""
    model = model_of(name)
    rng = random.Random(name)
    prefix = [rng.randrange(2, 250) for _ in range(30)]
    trie = make_trie([prefix[-1], 9, 11, 12, 30, 31], [-1, 0, 0, 1, 3, 1])
    got = {}
    for lean in (True, False):
        runner = ModelRunner(model, lean=lean)
        assert runner.backend.name == ("lean" if lean else "stock")
        runner.prefill(prefix[:-1])
        runner.forward_trie(trie)
        got[lean] = torch.stack([runner.logits_at(i, trie) for i in range(len(trie))])
    torch.testing.assert_close(got[True], got[False], rtol=0, atol=1e-4)
    with torch.inference_mode():
        for node in range(len(trie)):
            ids = prefix + [trie.tokens[i] for i in path_nodes(trie, node)]
            want = model(torch.tensor([ids])).logits[0, -1].float()
            torch.testing.assert_close(got[True][node], want, rtol=0, atol=1e-4)
    assert got[True][0].softmax(-1).max() < 0.9  # the random weights give real choices


@pytest.mark.parametrize("name", NAMES)
def test_tree_rows_equal_the_one_token_pass_in_bfloat16(name):
    model = model_of(name, torch.bfloat16)
    rng = random.Random(name)
    # windows of 8: a pass inside the window, one across its edge (rows on both sides), beyond
    for prefix_len, shape in ((3, "star"), (5, "chain"), (20, "random"), (41, "star")):
        prefix = [rng.randrange(2, 250) for _ in range(prefix_len)]
        trie = random_trie(rng, prefix[-1], 9, shape)
        assert check_tree(model, prefix, trie) == 0, (prefix_len, shape)


def generate(model, prompt, n, sampling, drafting, sources=()):
    gen = Generator(model, sampling, drafting, sources=list(sources), calibrate=False)
    return [t for event in gen.generate(prompt, n) for t in event.tokens], gen.stats


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", NAMES)
def test_tokenswift_writes_plain_decodings_text(name, dtype, monkeypatch):
    """Drafts from the text itself (right for a while, then wrong), the n-gram and suffix
    drafters and a source that is always wrong beside them: tries that branch, drafts
    accepted and rejected."""
    model = model_of(name, dtype)
    branching = []
    verify = ModelRunner.forward_trie

    def spy(runner, trie):
        branching.append(not trie.is_chain())
        return verify(runner, trie)

    monkeypatch.setattr(ModelRunner, "forward_trie", spy)
    rng = random.Random(f"{name}{dtype}")
    prompt = [rng.randrange(2, 250) for _ in range(24)]
    drafting = DraftSettings(sources=("ngram", "suffix"), max_nodes=12, adaptive=False)
    wrong = WrongAndSlow("wrong", delay=0.0)  # a sibling beside every other draft: a branch
    greedy = SamplingSettings(greedy=True, penalty=1.1, window=64)
    sampled = SamplingSettings(greedy=False, penalty=1.1, window=64, min_p=0.05, seed=7)
    for sampling in (greedy, sampled):
        plain, _ = generate(model, prompt, 64, sampling, DraftSettings.plain())
        # a history that agrees with the text for 40 tokens, then goes its own way
        history = prompt + plain[:40] + [rng.randrange(2, 250) for _ in range(24)]
        branching.clear()
        got, stats = generate(
            model, prompt, 64, sampling, drafting, [HistorySource(sequences=[history]), wrong]
        )
        assert got == plain, (
            sampling.greedy,
            next(i for i, (a, b) in enumerate(zip(got, plain, strict=False)) if a != b),
        )
        assert stats.accepted_drafts > 0 and any(branching), (sampling.greedy, "no speculation")


def test_a_model_off_the_lean_pass_says_its_text_may_differ():
    """What `generate` and `bench` print: nothing more for a covered family; the Speed dock's
    words and why for a model whose passes are not invariant (a hook keeps transformers'
    forward; the loader turned invariance off; bench's methods ask for it anyway)."""
    model = build_family("qwen3", seed=9)
    assert backends.precision_line("bfloat16", model) == "precision: bfloat16"
    handle = model.model.layers[0].register_forward_hook(lambda *a: None)
    assert ModelRunner(model).backend.name == "stock"
    assert backends.precision_line("bfloat16", model) == (
        "precision: bfloat16 · may differ from plain decoding "
        "(Qwen3DecoderLayer runs transformers' own forward)"
    )
    handle.remove()
    window = model_of("mistral-window")  # the earlier passes know no window: stock forward
    assert ModelRunner(window, invariant=False).backend.name == "stock"
    backends.set_exact(model, False)
    assert not ModelRunner(model, invariant=False).invariant
    assert backends.precision_line("x", model) == (
        "precision: x · may differ from plain decoding (auto chose this CPU's fastest float32 "
        "kernels over exact passes; --dtype float32 keeps every pass exact)"
    )
    assert "(passes take the fastest" in backends.precision_line("x", model, invariant=False)
    assert backends.precision_line("x", model, invariant=True) == "precision: x"


def test_longrope_one_token_passes_follow_transformers_across_the_switch():
    """Longrope takes its long factors when a call reaches position 16 here: the per-position
    table gives each position what transformers' one-token pass gives it, on both sides."""
    model = model_of("phi3-longrope")
    runners = [ModelRunner(model, lean=lean) for lean in (True, False)]
    assert [r.backend.name for r in runners] == ["lean", "stock"] and runners[0].invariant
    prompt = [5, 9, 13, 17, 21, 25, 29, 33]
    for runner in runners:
        runner.prefill(prompt[:-1])
    token = prompt[-1]
    for _ in range(16):  # positions 7 to 22
        logits = []
        for runner in runners:
            runner.forward_trie(make_trie([token], [-1]))
            logits.append(runner.logits_at(0))
            runner.compact([0])
        torch.testing.assert_close(logits[0], logits[1], rtol=0, atol=1e-4)
        token = int(logits[0].argmax())

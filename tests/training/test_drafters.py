"""Learned drafters on a tiny model: training lowers the loss, files round-trip exactly, a
drafter for another model is refused, and drafting with them keeps greedy output exact."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from swiftwriter.bench.draftpass import DraftPass, DraftPassGenerator, PassDrafterSource
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding import drafter_files as files
from swiftwriter.engine.passes import row_values
from swiftwriter.engine.passes.verify import ModelRunner
from swiftwriter.errors import UserError
from swiftwriter.training.features import extract_rows
from swiftwriter.training.train import Trainer, TrainSettings, train

from tests.conftest import build_tiny


def own_text(model, rows=12, length=96, seed=0):
    """The tiny model's own greedy text from random starts (what a drafter must predict)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(rows):
        prompt = torch.randint(2, model.config.vocab_size, (1, 4), generator=g)
        ids = model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=length,
            min_new_tokens=length,
            do_sample=False,
            pad_token_id=0,
        )
        out.append(ids[0, 4 : 4 + length])
    return torch.stack(out)


@pytest.fixture(scope="module")
def tiny_data(tiny_llama):
    rows = own_text(tiny_llama)
    data = extract_rows(tiny_llama, rows, penalty=TrainSettings.penalty)
    data["tokens"] = rows
    return data


@pytest.mark.parametrize("kind", ["linear", "recurrent"])
def test_a_few_steps_lower_the_loss(tiny_llama, tiny_data, kind):
    settings = TrainSettings(kind=kind, steps=40, batch=128, draft_vocab=256, warmup=5, val_rows=2)
    trainer = Trainer(tiny_llama, "tiny", tiny_data, settings)
    r, t = trainer.batches.positions(10_000, 256)
    with torch.no_grad():
        before = float(trainer.loss(r, t))
    for _ in range(settings.steps):
        trainer.train_step()
    with torch.no_grad():
        after = float(trainer.loss(r, t))
    assert after < 0.9 * before


def test_saved_drafter_reproduces_its_outputs_and_checkpoints_resume(
    tiny_llama, tiny_data, tmp_path
):
    settings = TrainSettings(
        kind="recurrent",
        steps=6,
        batch=64,
        draft_vocab=200,
        warmup=2,
        val_rows=2,
        checkpoint_every=3,
    )
    bundle = train(tiny_llama, "tiny", tiny_data, tmp_path / "d", settings)
    loaded = files.load(tmp_path / "d", tiny_llama)
    assert torch.equal(loaded.vocab, bundle.vocab)
    feat, emb = torch.randn(5, 32), torch.randn(5, 32)
    with torch.no_grad():
        assert torch.equal(loaded.module(feat, emb), bundle.module(feat, emb))
    card = loaded.card
    assert card["base_model"] == "tiny" and card["kind"] == "recurrent"
    assert len(card["validation"]["top1"]) == 3 and len(card["validation"]["top3"]) == 3
    # Resuming at the final step changes nothing; more steps continue from the checkpoint.
    more = TrainSettings(**{**settings.__dict__, "steps": 9})
    trainer = Trainer(tiny_llama, "tiny", tiny_data, more)
    assert trainer.resume(tmp_path / "d" / "checkpoint") and trainer.step == 6
    with torch.no_grad():
        assert torch.equal(trainer.module(feat, emb), bundle.module(feat, emb))
    # Only safetensors and JSON on disk: nothing pickled.
    assert {p.suffix for p in (tmp_path / "d").rglob("*") if p.is_file()} <= {
        ".safetensors",
        ".json",
    }


def test_a_drafter_for_another_model_is_refused(tiny_llama, tiny_data, tmp_path):
    settings = TrainSettings(kind="linear", steps=2, batch=32, draft_vocab=64, warmup=1, val_rows=2)
    train(tiny_llama, "tiny", tiny_data, tmp_path / "d", settings)
    other = build_tiny("llama", hidden=48, seed=5)
    with pytest.raises(
        UserError, match="does not fit this model: hidden size 32 vs the model's 48"
    ):
        files.load(tmp_path / "d", other)
    (tmp_path / "bad").mkdir()
    with pytest.raises(UserError, match="No drafter"):
        files.load(tmp_path / "bad", tiny_llama)


@pytest.fixture(scope="module")
def trained(tiny_llama, tiny_data, tmp_path_factory):
    """One briefly trained drafter of each kind, shared by the exactness checks."""
    out = {}
    for kind in ("linear", "recurrent"):
        settings = TrainSettings(
            kind=kind, steps=150, batch=256, draft_vocab=256, warmup=10, val_rows=2
        )
        out[kind] = train(tiny_llama, "tiny", tiny_data, tmp_path_factory.mktemp(kind), settings)
    return out


@pytest.mark.parametrize("kind", ["linear", "recurrent"])
@pytest.mark.parametrize("penalty", [1.0, 1.2])
@pytest.mark.parametrize("mode", ["fused", "pass", "one-read"])
def test_drafting_with_a_drafter_stays_exact(
    tiny_llama, tiny_data, trained, kind, penalty, mode, monkeypatch
):
    """Fused (the app's), the bench's draft-pass experiment (bench/draftpass.py), and fused
    with every node's choice and state read in one go (as on a GPU: no per-node reads)."""
    passes = []
    draft_pass = DraftPass.run
    monkeypatch.setattr(DraftPass, "run", lambda *a: passes.append(draft_pass(*a)))
    sampling = SamplingSettings(greedy=True, penalty=penalty, window=64)
    # two levels for the recurrent drafter (its default drafts one), so chains are checked too
    tree = (3, 2) if kind == "recurrent" else ()
    drafting = DraftSettings(sources=("heads",), max_nodes=12, adaptive=False, head_tree=tree)
    prompt = tiny_data["tokens"][-1, :20].tolist()
    plain = Generator(tiny_llama, sampling, DraftSettings.plain())
    want = [t for ev in plain.generate(prompt, 120) for t in ev.tokens]
    if mode == "pass":
        gen = DraftPassGenerator(
            tiny_llama, sampling, drafting, drafter=trained[kind], partial_budget=64
        )
    else:
        one_read = mode == "one-read"
        gen = Generator(
            tiny_llama, sampling, drafting, drafter=trained[kind], batched_accept=one_read
        )
        if one_read:  # the drafter's states come with the step's one read
            monkeypatch.setattr(ModelRunner, "feature_at", None)
    got = [t for ev in gen.generate(prompt, 120) for t in ev.tokens]
    assert got == want
    # one draft pass after every step but the last, and none when fused
    assert len(passes) == (gen.stats.forward_passes - 1 if mode == "pass" else 0)
    stats = gen.stats.as_dict()
    assert stats["accepted_by_source"].get("heads", 0) > 0, stats["accepted_by_source"]
    if penalty == 1.0:  # chains deeper than one token (the penalty makes the tiny model erratic)
        assert stats["accepted_by_source_depth"].get("heads:2", 0) > 0
    # The pre-norm hook is removed when the run ends.
    assert not tiny_llama.get_decoder().layers[-1]._forward_hooks


def test_an_older_drafter_gets_half_the_penalty_and_the_models_own_guess_all_of_it(
    tiny_llama, trained
):
    """A drafter trained without the penalty on its own scores (cards before the penalised
    target) is scored with 1 + (penalty - 1) / 2 (its margins are smaller than the model's: the
    full penalty knocks out tokens the target keeps); the model's own logits in draft-pass mode
    get the run's penalty, exactly as the target does."""
    import dataclasses

    bundle = trained["recurrent"]
    older = {**bundle.card, "training": {k: v for k, v in bundle.card["training"].items()}}
    del older["training"]["penalty"]
    source = PassDrafterSource(dataclasses.replace(bundle, card=older), tiny_llama)
    source.start(SamplingSettings(greedy=True, penalty=1.2, window=64), 256)
    assert source.penalty == 1.2 and source.draft_penalty == pytest.approx(1.1)
    states = torch.randn(
        2, tiny_llama.config.hidden_size, generator=torch.Generator().manual_seed(1)
    )
    logits = states @ source.w_t
    presence = torch.zeros(logits.shape[-1], dtype=torch.bool)
    presence[logits[0].topk(5).indices] = True

    def scored(theta):
        penalised = torch.where(logits > 0, logits / theta, logits * theta)
        return torch.where(presence, penalised, logits).softmax(-1)

    indices, probs = source._top(states, presence, 8, 0)
    torch.testing.assert_close(probs, scored(1.1).gather(-1, indices))
    assert torch.equal(indices, scored(1.1).topk(8).indices)
    assert not torch.allclose(probs, scored(1.2).gather(-1, indices))
    # draft-pass mode: the model's own next-token logits are the first level, fully penalised
    base = torch.randn(256, generator=torch.Generator().manual_seed(2)) * 4
    full = torch.zeros(256, dtype=torch.bool)
    full[base.topk(3).indices] = True
    source.observe(base.topk(3).indices.tolist())
    source.set_pass_feature(states[0], base)
    first = source.propose([5], 8)[0]
    penalised = torch.where(base > 0, base / 1.2, base * 1.2)
    assert first.tokens == (int(torch.where(full, penalised, base).argmax()),)


def test_a_drafter_trained_on_the_penalised_target_gets_the_whole_penalty(tiny_llama, trained):
    from swiftwriter.engine.decoding.drafter_source import DrafterSource

    assert trained["recurrent"].card["training"]["penalty"] == 1.2
    source = DrafterSource(trained["recurrent"], tiny_llama)
    source.start(SamplingSettings(greedy=True, penalty=1.3, window=64), 256)
    assert source.draft_penalty == pytest.approx(1.3)
    source.start(SamplingSettings(greedy=True, penalty=1.0, window=64), 256)
    assert source.draft_penalty == 1.0


@pytest.mark.parametrize("pays", [True, False])
def test_a_bfloat16_model_drafts_in_bfloat16_where_that_measures_faster(
    tiny_llama, tiny_data, trained, pays, monkeypatch
):
    """The drafter's weights are read on every drafting step: with a bfloat16 model it runs a
    bfloat16 copy where its products measured faster so (the bundle's own module stays float32
    for every other use), and the text stays the model's own either way."""
    import copy

    from swiftwriter.engine.decoding import drafter_source as source

    bundle = trained["recurrent"]
    shapes = tuple(
        tuple(m.weight.shape) for m in bundle.module.modules() if isinstance(m, torch.nn.Linear)
    )
    monkeypatch.setattr(source, "_BF16_PAYS", {shapes: pays})
    model = copy.deepcopy(tiny_llama).to(torch.bfloat16)
    drafter = source.DrafterSource(bundle, model)
    want_dtype = torch.bfloat16 if pays else torch.float32
    assert drafter.dtype == want_dtype and drafter.w_t.dtype == want_dtype
    assert all(p.dtype == want_dtype for p in drafter.module.parameters())
    assert all(p.dtype == torch.float32 for p in bundle.module.parameters())
    sampling = SamplingSettings(greedy=True, penalty=1.0, window=64)
    drafting = DraftSettings(sources=("heads",), max_nodes=12, adaptive=False)
    prompt = tiny_data["tokens"][-1, :20].tolist()
    plain = Generator(model, sampling, DraftSettings.plain())
    want = [t for ev in plain.generate(prompt, 80) for t in ev.tokens]
    gen = Generator(model, sampling, drafting, drafter=bundle)
    assert gen.drafter_source.dtype == want_dtype
    assert [t for ev in gen.generate(prompt, 80) for t in ev.tokens] == want
    stats = gen.stats.as_dict()
    assert stats["accepted_by_source"].get("heads", 0) > 0
    # the recurrent drafter's default tree is one level: its second held too rarely to pay
    assert max(int(k.split(":")[1]) for k in stats["accepted_by_source_depth"]) == 1


def test_the_fastest_sampler_drafts_a_second_level_by_default(tiny_llama, trained):
    """The drafter's tree when the settings name none: one level of three for greedy runs and
    the same-text sampler, three then two for the fastest sampler (its rejection walk accepts
    siblings at 1 - TV or better, and there the second level paid), the linear heads' three
    levels whatever the sampler, and a tree the settings name always wins."""
    greedy = SamplingSettings(greedy=True, penalty=1.0, window=64)
    creative = SamplingSettings(greedy=False, temperature=0.8, top_p=0.95, penalty=1.0, window=64)

    def tree(kind, sampling, **drafting):
        settings = DraftSettings(sources=("heads",), adaptive=False, **drafting)
        return Generator(tiny_llama, sampling, settings, drafter=trained[kind]).drafter_source.tree

    assert tree("recurrent", greedy) == (3,)
    assert tree("recurrent", greedy, sampler="fastest") == (3,)  # greedy: no sampler at all
    assert tree("recurrent", creative) == (3,)
    assert tree("recurrent", creative, sampler="fastest") == (3, 2)
    assert tree("recurrent", creative, sampler="fastest", head_tree=(4,)) == (4,)
    assert tree("linear", creative, sampler="fastest") == (3, 3, 3)


def test_the_bfloat16_choice_is_measured_once_per_drafter_shape(trained, monkeypatch):
    from swiftwriter.engine.decoding import drafter_source as source
    from swiftwriter.engine.passes import kernels

    monkeypatch.setattr(source, "_BF16_PAYS", {})
    timed = []

    def fake_time(linears, rows, reps, among=None):
        dtype = linears[0].weight.dtype
        timed.append(dtype)  # bfloat16 twice as fast here
        return {kernels.STOCK: {n: 1.0 if dtype == torch.bfloat16 else 2.0 for n in rows}}

    monkeypatch.setattr(source, "time_linears", fake_time)  # the name the source imported
    module, dtype = source.bfloat16_if_faster(trained["recurrent"].module)
    assert dtype == torch.bfloat16 and next(module.parameters()).dtype == torch.bfloat16
    assert module is not trained["recurrent"].module
    assert sorted(map(str, timed)) == ["torch.bfloat16", "torch.float32"]
    source.bfloat16_if_faster(trained["recurrent"].module)
    assert len(timed) == 2  # remembered


def test_a_grown_tree_expands_only_the_paths_the_drafter_is_confident_of(tiny_llama, trained):
    """EAGLE-2's dynamic tree (`head_grow`): the second level is drafted under a first-level
    node only while the drafter's probability of that node is at least the threshold, so
    unconfident steps skip the second level's host time."""
    from swiftwriter.engine.decoding.drafter_source import DrafterSource

    feature = torch.randn(tiny_llama.config.hidden_size, generator=torch.Generator().manual_seed(3))

    def drafts(grow):
        source = DrafterSource(trained["recurrent"], tiny_llama, tree=(3, 2), grow=grow)
        source.start(SamplingSettings(greedy=True, penalty=1.0), 256)
        source.set_feature(feature)
        return source, [c.tokens for c in source.propose([7], 16)]

    source, every = drafts(0.0)
    assert sum(len(t) == 2 for t in every) == 6  # all three first-level nodes grew
    state = source.module(
        feature[None].to(source.dtype),
        row_values(source.embedding, torch.tensor([7])).to(source.dtype),
    )
    indices, values = source._top(state, None, 3, 0)
    firsts = [source.vocab_list[i] for i in indices[0].tolist()]
    assert [t for t in every if len(t) == 1] == [(f,) for f in firsts]
    p1, p2 = values[0].tolist()[:2]
    assert p1 > p2
    _, grown = drafts((p1 + p2) / 2)  # only the most likely first node is confident enough
    assert [t for t in grown if len(t) == 1] == [(f,) for f in firsts]
    assert {t[0] for t in grown if len(t) == 2} == {firsts[0]}
    assert set(grown) <= set(every)
    _, flat = drafts(min(0.999, p1 + 1e-3))  # none is: one level only
    assert all(len(t) == 1 for t in flat)
    with pytest.raises(UserError):
        DraftSettings(head_grow=1.0)


CREATIVE = SamplingSettings(greedy=False, temperature=0.8, top_p=0.95, min_p=0.05, window=64)


def test_sampled_drafts_share_the_targets_noise_and_stay_exact(
    tiny_llama, tiny_data, trained, monkeypatch
):
    """Sampling (the app's Creative settings): the drafter proposes what its own distribution
    draws under the noise the target will draw with, so it is accepted more often than when
    it proposes its most likely tokens, and the text is plain decoding's for every seed."""
    from swiftwriter.engine.decoding.drafter_source import DrafterSource

    drafting = DraftSettings(sources=("heads",), max_nodes=12, adaptive=False, head_tree=(3, 2))
    prompt = tiny_data["tokens"][-1, :20].tolist()
    accepted = {True: 0, False: 0}
    for coupled in (True, False):
        if not coupled:  # the drafts without the noise: most likely first
            monkeypatch.setattr(DrafterSource, "couple", lambda self, noise: None)
        for seed in range(6):
            plain = Generator(tiny_llama, CREATIVE, DraftSettings.plain())
            want = [t for ev in plain.generate(prompt, 80, seed=seed) for t in ev.tokens]
            gen = Generator(tiny_llama, CREATIVE, drafting, drafter=trained["recurrent"])
            got = [t for ev in gen.generate(prompt, 80, seed=seed) for t in ev.tokens]
            assert got == want, seed
            accepted[coupled] += gen.stats.accepted_drafts
    assert accepted[True] > 2 * accepted[False], accepted


def test_coupled_candidates_are_the_drafters_draws_under_the_noise(tiny_llama, trained):
    """The k candidates for a position are the top k of the drafter's processed scores plus
    that position's noise (a draw without replacement from its distribution); where the
    run's filters leave fewer than k, its most likely ids fill the rest."""
    from swiftwriter.engine.decoding.drafter_source import DrafterSource
    from swiftwriter.engine.decoding.logits import Draws, LogitsPipeline, penalise

    source = DrafterSource(trained["recurrent"], tiny_llama, tree=(3,))
    source.start(CREATIVE, 256)
    draws = Draws(4)
    source.couple(lambda k: draws.gumbel(10 + k, 256))
    feature = torch.randn(tiny_llama.config.hidden_size, generator=torch.Generator().manual_seed(5))
    state = source.module(
        feature[None].to(source.dtype),
        row_values(source.embedding, torch.tensor([7])).to(source.dtype),
    )
    indices, values = source._top(state, None, 3, 1)
    x = penalise(source.draft_logits(state).float(), None, source.draft_penalty)
    processed = LogitsPipeline(dataclasses.replace(CREATIVE, penalty=1.0)).process(x, None)
    scores = processed[0] + draws.gumbel(11, 256)[source.vocab].float()
    alive = [i for i in scores.topk(3).indices.tolist() if scores[i] > float("-inf")]
    likely = [i for i in x[0].softmax(-1).topk(3).indices.tolist() if i not in alive]
    assert indices[0].tolist() == (alive + likely)[:3]
    assert torch.allclose(values[0], x[0].softmax(-1)[indices[0]])
    greedy = DrafterSource(trained["recurrent"], tiny_llama, tree=(3,))
    greedy.start(dataclasses.replace(CREATIVE, greedy=True), 256)
    greedy.couple(lambda k: draws.gumbel(10 + k, 256))  # greedy runs are never coupled
    assert (
        greedy._top(state, None, 3, 1)[0][0].tolist() == x[0].softmax(-1).topk(3).indices.tolist()
    )


def test_the_fastest_sampler_draws_the_drafters_tree_from_q_and_leaves_plain_text_alone(
    tiny_llama, tiny_data, trained
):
    """The "fastest" sampler (engine/decoding/rejection.py): the drafter keeps each node's draws
    and its distribution q for the walk, its tree has one shape whatever it drew (a grow
    threshold or a value-sorted beam would make the trie depend on the draws), drafts are
    accepted, and plain decoding writes the same text under either sampler."""
    from swiftwriter.engine.decoding.drafter_source import DrafterSource
    from swiftwriter.engine.decoding.rejection import RejectionDraws

    prompt = tiny_data["tokens"][-1, :20].tolist()
    for seed in range(2):
        texts = [
            [
                t
                for ev in Generator(
                    tiny_llama, CREATIVE, DraftSettings(sources=(), max_nodes=0, sampler=sampler)
                ).generate(prompt, 40, seed=seed)
                for t in ev.tokens
            ]
            for sampler in ("same-text", "fastest")
        ]
        assert texts[0] == texts[1], seed

    source = DrafterSource(trained["recurrent"], tiny_llama, tree=(3, 2), grow=0.5)
    source.start(CREATIVE, 256)
    source.set_feature(torch.randn(tiny_llama.config.hidden_size))
    shapes = []
    for seed in (1, 2):
        source.sample_drafts(RejectionDraws(seed).next_call())
        cands = source.propose(prompt, 20)
        # below the first level's drafts lie the second's: their ranks are their places
        shapes.append([(len(c.tokens), c.ranks[0]) for c in cands])
        records = source.drawn()
        assert set(records) == {()} | {c.tokens for c in cands if len(c.tokens) == 1}
        for record in records.values():
            assert abs(float(record.probs.sum()) - 1) < 1e-9
            q = dict(zip(record.ids.tolist(), record.probs.tolist(), strict=True))
            assert all(q.get(x, 0) > 0 for x in record.drawn)
            assert len(set(record.drawn)) == len(record.drawn)  # without replacement
    assert shapes[0] == shapes[1] and len(shapes[0]) == 3 + 3 * 2
    assert sorted({rank for _, rank in shapes[0]}) == [0, 1, 2]

    drafting = DraftSettings(
        sources=("heads",), max_nodes=12, adaptive=False, head_tree=(3, 2), sampler="fastest"
    )
    gen = Generator(tiny_llama, CREATIVE, drafting, drafter=trained["recurrent"])
    for seed in range(2):
        for _ in gen.generate(prompt, 60, seed=seed):
            pass
        assert gen.stats.sampler == "fastest" and gen.stats.accepted_drafts > 0

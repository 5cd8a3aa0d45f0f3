"""A drafter trained for sampled agreement: the agreement under shared Gumbel noise is computed
exactly (checked against many noise draws), the coupled loss is zero only for the target's own
distribution, training lowers it, a drafter can start from another, and the model writes its
training text in the app's modes."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from safetensors import safe_open
from swiftwriter.engine.decoding.drafter_source import draft_penalty_share
from swiftwriter.engine.decoding.logits import LogitsPipeline, PenaltyWindow, penalise
from swiftwriter.engine.decoding.settings import MODES
from swiftwriter.errors import UserError
from swiftwriter.training import accuracy, selfdistill
from swiftwriter.training.features import extract_rows
from swiftwriter.training.train import Trainer, TrainSettings, coupled_loss, tv_loss

from tests.conftest import build_tiny
from tests.training.test_drafters import own_text

FILTERS = LogitsPipeline(replace(MODES["creative"], penalty=1.0))


def gumbel(shape, seed):
    u = torch.rand(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return -torch.log(-torch.log(u.clamp_min(1e-300)))


def test_the_agreement_is_what_shared_noise_draws_give():
    g = torch.Generator().manual_seed(0)
    p = torch.rand(4, 9, generator=g, dtype=torch.float64).pow(3)
    q = torch.rand(4, 9, generator=g, dtype=torch.float64).pow(3)
    p[:, :2] = 0  # supports that differ, as filtered distributions do
    q[:, -1] = 0
    p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)
    draws = 100_000
    noise = gumbel((draws, 4, 9), 1)
    same = ((p.log() + noise).argmax(-1) == (q.log() + noise).argmax(-1)).double().mean(0)
    exact = accuracy.coupled_agreement(p, q)
    sigma = (exact * (1 - exact) / draws).sqrt()
    assert torch.all((exact - same).abs() < 4 * sigma), (exact, same)
    tv = 0.5 * (p - q).abs().sum(-1)
    assert torch.all(exact >= (1 - tv) / (1 + tv))  # Daliri, Musco and Suresh's bound
    assert torch.allclose(accuracy.coupled_agreement(p, p), torch.ones(4, dtype=p.dtype))
    # the columns may come in any order and from two lists: the same number
    order = torch.randperm(9, generator=g)
    merged = accuracy.agreement_of(
        torch.arange(9).expand(4, 9)[:, :5], p[:, :5], order.expand(4, 9), q[:, order]
    )
    rest = p[:, 5:].sum(-1)  # p's mass left out of its list: a lower bound, as documented
    assert torch.all(merged <= exact + 1e-9)
    assert torch.allclose(
        accuracy.agreement_of(torch.arange(9).expand(4, 9), p, order.expand(4, 9), q[:, order]),
        exact,
    )
    assert torch.all(rest > 0)


def test_the_total_variation_is_what_rejection_sampling_loses_on_one_draft():
    """TV(p, q) from (ids, probabilities) lists is 1 - sum min(p, q): half the L1 distance on
    full supports, 0 for one distribution, 1 for disjoint ones, and one minus how often a draft
    x ~ q is kept with probability min(1, p(x) / q(x)) (counted over many draws)."""
    g = torch.Generator().manual_seed(3)
    p = torch.rand(4, 9, generator=g, dtype=torch.float64).pow(3)
    q = torch.rand(4, 9, generator=g, dtype=torch.float64).pow(3)
    p[:, :2] = 0
    q[:, -1] = 0
    p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)
    ids = torch.arange(9).expand(4, 9)
    order = torch.randperm(9, generator=g)
    tv = accuracy.total_variation_of(ids, p, order.expand(4, 9), q[:, order])
    assert torch.allclose(tv, 0.5 * (p - q).abs().sum(-1))
    assert torch.allclose(
        accuracy.total_variation_of(ids, p, ids, p), torch.zeros(4, dtype=p.dtype)
    )
    apart = accuracy.total_variation_of(
        ids[:, :4], p[:, :4] * 0 + 0.25, ids[:, 4:8], p[:, :4] * 0 + 0.25
    )
    assert torch.allclose(apart, torch.ones(4, dtype=p.dtype))
    draws = 100_000
    x = torch.multinomial(q, draws, replacement=True, generator=g)  # [4, draws]
    keep = (p.gather(-1, x) / q.gather(-1, x)).clamp(max=1)
    accepted = (torch.rand(4, draws, generator=g, dtype=torch.float64) < keep).double().mean(-1)
    sigma = (accepted * (1 - accepted) / draws).sqrt()
    assert torch.all((accepted - (1 - tv)).abs() < 4 * sigma), (accepted, 1 - tv)
    # and shared noise agrees at least (1 - TV) / (1 + TV), with TV as computed here
    assert torch.all(accuracy.coupled_agreement(p, q) >= (1 - tv) / (1 + tv))


@pytest.mark.parametrize("loss", [coupled_loss, tv_loss])
def test_the_sampled_losses_are_zero_for_the_target_and_only_for_it(loss):
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(6, 64, generator=g) * 3
    p_full = FILTERS.process(logits, None).softmax(-1)
    top = p_full.topk(32)
    idx, p = top.indices, top.values
    exact = loss(p_full.clamp_min(1e-38).log(), idx, p)
    assert torch.all(exact.abs() < 1e-4)
    other = loss((logits + torch.randn(6, 64, generator=g)).log_softmax(-1), idx, p)
    assert torch.all(other > 0.05)
    unfiltered = loss((logits / 0.8).log_softmax(-1), idx, p)  # mass on cut tokens
    assert torch.all(unfiltered > 0) and torch.all(unfiltered < other)


@pytest.fixture(scope="module")
def coupled_llama():
    """A model of this file's own: calling it with output_hidden_states leaves transformers'
    capturing hooks on its layers, which the session's shared tiny model must not carry into
    the drafter tests that count the hooks a run leaves behind."""
    return build_tiny("llama", seed=1)


@pytest.fixture(scope="module")
def sampled_data(coupled_llama):
    rows = own_text(coupled_llama, rows=6, length=48)
    data = extract_rows(coupled_llama, rows, penalty=1.2)
    data["tokens"] = rows
    return data


@pytest.mark.parametrize("objective", ["coupled", "tv"])
def test_training_toward_the_presets_distribution_lowers_the_loss(
    coupled_llama, sampled_data, objective
):
    settings = TrainSettings(
        steps=30, batch=64, draft_vocab=256, warmup=5, val_rows=2, objective=objective,
        feature_weight=0.0,  # the loss is the sampled objective alone
    )  # fmt: skip
    trainer = Trainer(coupled_llama, "tiny", sampled_data, settings)
    r, t = trainer.batches.positions(10_000, 256)

    def measured():
        with torch.no_grad():
            got = accuracy.hits(
                trainer.module, "recurrent", trainer.data, trainer.emb, trainer.w, trainer.vocab,
                r, t, 1, 1.2, 1024, trainer.filters,
            )  # fmt: skip
            return float(trainer.loss(r, t)), got["coupled"][0], got["tv"][0]

    before, agree_before, tv_before = measured()
    for _ in range(settings.steps):
        trainer.train_step()
    after, agree_after, tv_after = measured()
    assert after < 0.9 * before
    assert agree_after > agree_before and tv_after < tv_before


def test_a_drafter_starts_from_another_with_its_vocabulary(coupled_llama, sampled_data, tmp_path):
    from swiftwriter.engine.decoding import drafter_files as files

    first = Trainer(
        coupled_llama, "tiny", sampled_data, TrainSettings(steps=3, batch=16, val_rows=2)
    )
    for _ in range(3):
        first.train_step()
    files.save(tmp_path, first.bundle({}, {}))
    settings = TrainSettings(draft_vocab=64, val_rows=2, objective="both", init=str(tmp_path))
    second = Trainer(coupled_llama, "tiny", sampled_data, settings)
    assert torch.equal(second.vocab, first.vocab[:64]) and len(first.vocab) > 64
    for key, value in first.module.state_dict().items():
        assert torch.equal(second.module.state_dict()[key], value), key
    with pytest.raises(UserError, match="linear"):
        Trainer(coupled_llama, "tiny", sampled_data, replace(settings, kind="linear"))
    with pytest.raises(UserError, match="sampled preset"):
        TrainSettings(objective="coupled", preset="precise")


def test_the_agreement_on_a_text_is_the_drafters_filtered_draw_against_the_targets(
    coupled_llama, sampled_data
):
    trainer = Trainer(
        coupled_llama, "tiny", sampled_data, TrainSettings(draft_vocab=128, val_rows=2)
    )
    bundle = trainer.bundle({}, {})
    ids = sampled_data["tokens"][0, :40].tolist()
    # min-p 0.2 keeps at most 5 ids, so the 32 kept per side hold the whole supports even on
    # the tiny model's flat distributions (Creative's 0.05 keeps at most 20)
    # (the penalty on_text is given below; DRY, which the pass over a text does not apply, off)
    sampling = replace(MODES["creative"], window=16, min_p=0.2, penalty=1.2, dry_multiplier=0.0)
    filters = LogitsPipeline(replace(sampling, penalty=1.0))
    got = accuracy.on_text(coupled_llama, bundle, ids, 20, 1.2, 16, depth=2, sampling=sampling)
    assert "coupled" not in accuracy.on_text(coupled_llama, bundle, ids, 20, 1.2, 16, depth=2)
    # by hand, one position at a time over the whole vocabulary
    target = LogitsPipeline(sampling)
    with torch.no_grad():
        out = coupled_llama(torch.tensor([ids]), output_hidden_states=True)
    logits, final = out.logits[0].float(), out.hidden_states[-1][0].float()
    emb = coupled_llama.get_input_embeddings().weight.detach()
    w = coupled_llama.get_output_embeddings().weight.detach()[bundle.vocab]
    theta = 1.0 + 0.2 * draft_penalty_share(bundle.card)
    module = bundle.module.float()
    want, want_tv = [[], []], [[], []]
    for t in range(19, len(ids) - 3):
        state = final[t]
        for i in (1, 2):
            pos = t + i
            state = module(state[None], emb[ids[pos]][None])[0]
            window = PenaltyWindow(256, 16)
            window.extend(ids[: pos + 1])
            presence = window.presence()
            p = target.process(logits[pos], presence).softmax(-1)
            scores = torch.full((256,), float("-inf"))
            scores[bundle.vocab] = penalise(state @ w.T, presence[bundle.vocab], theta)
            q = filters.process(scores, None).softmax(-1)
            want[i - 1].append(float(accuracy.coupled_agreement(p, q)))
            want_tv[i - 1].append(float(0.5 * (p - q).abs().sum()))
    assert got["positions"] == len(want[0])
    for depth in range(2):
        assert got["coupled"][depth] == pytest.approx(sum(want[depth]) / len(want[0]), abs=1e-3)
        assert got["tv"][depth] == pytest.approx(sum(want_tv[depth]) / len(want[0]), abs=1e-3)


class _Tokenizer:
    padding_side, pad_token, eos_token = "right", None, "<eos>"

    def __call__(self, texts, return_tensors="pt", padding=True):
        from transformers import BatchEncoding

        ids = torch.tensor([[2 + ord(c) % 90 for c in text[:6].ljust(6)] for text in texts])
        return BatchEncoding({"input_ids": ids, "attention_mask": torch.ones_like(ids)})


def test_the_model_writes_its_training_text_in_the_modes_asked(coupled_llama, tmp_path):
    coupled_llama.generation_config.eos_token_id = None
    paths = selfdistill.write_text(
        coupled_llama, _Tokenizer(), tmp_path, 3 * 2 * 28, batch=2, length=28,
        modes=("creative", "precise"),
    )  # fmt: skip
    modes = []
    for path in paths:
        with safe_open(str(path), framework="pt") as f:
            modes.append(f.metadata()["mode"])
    assert modes == ["creative", "precise", "creative"]
    with pytest.raises(UserError, match="balanced"):
        selfdistill.body_sampler("balanced")

"""The attention-layer drafter tried against the recurrent one: causal as drafting needs (a
depth's guess at t depends on nothing after t, nor on other positions' guesses), it learns, and
it is scored with the same measure as the recurrent drafter."""

from __future__ import annotations

import torch
from swiftwriter.training.features import extract_rows
from swiftwriter.training.train import TrainSettings

from experiments.eagle_trial import AttentionDrafter, AttentionTrainer, attention_hits
from tests.training.test_drafters import own_text


def _inputs(b=1, t=10, h=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(b, t, h, generator=g)
    embs = [torch.randn(b, t, h, generator=g) for _ in range(3)]
    return feats, embs


def test_each_depth_sees_only_the_true_prefix_and_its_own_chain():
    torch.manual_seed(0)
    drafter = AttentionDrafter(32, heads=2).eval()
    for p in drafter.parameters():  # leave the zero-ish init: make every path matter
        if p.dim() > 1:
            torch.nn.init.normal_(p, std=0.3)
    feats, embs = _inputs()
    base = drafter.unroll(feats, embs)
    later = feats.clone()
    later[:, 6:] += 5.0  # change everything after position 5
    changed = drafter.unroll(later, [e.clone() for e in embs])
    for a, b in zip(base, changed, strict=True):
        torch.testing.assert_close(a[:, :6], b[:, :6])
        assert not torch.allclose(a[:, 6:], b[:, 6:])
    # depth 2 at t = 5 is what drafting computes: depth 1 over the prefix up to 5, then one more
    # step whose keys are the prefix's depth-1 keys and its own
    short = drafter.unroll(feats[:, :6], [e[:, :6] for e in embs[:2]])
    torch.testing.assert_close(short[1][:, 5], base[1][:, 5])
    # another position's depth-1 guess does not reach depth 2 at t = 5 through the keys
    other = [e.clone() for e in embs]
    other[1][:, 3] += 5.0  # the token a depth-2 step at position 3 reads
    torch.testing.assert_close(drafter.unroll(feats, other)[1][:, 5], base[1][:, 5])


def test_training_lowers_the_loss_and_hits_are_counted_like_the_recurrent_drafters(tiny_llama):
    rows = own_text(tiny_llama, rows=6, length=64)
    data = extract_rows(tiny_llama, rows, penalty=1.2)
    data["tokens"] = rows
    settings = TrainSettings(steps=40, batch=64, draft_vocab=256, warmup=5, val_rows=1)
    trainer = AttentionTrainer(tiny_llama, data, settings, span=32)
    r, s = torch.tensor([0, 1]), torch.tensor([3, 7])
    with torch.no_grad():
        before = float(trainer.loss(r, s))
    for _ in range(settings.steps):
        trainer.train_step()
    with torch.no_grad():
        after = float(trainer.loss(r, s))
    assert after < 0.9 * before
    # counted like the recurrent drafter's: a drafter that predicted the model's own feature
    # exactly would hold the target's penalised first choice (nearly) everywhere
    emb = tiny_llama.get_input_embeddings().weight.detach()
    vocab = torch.arange(256)
    w = tiny_llama.get_output_embeddings().weight.detach().float()
    one = {k: v[-1:] for k, v in data.items()}
    t = torch.arange(64 - 3 - 1)

    class Oracle:
        def unroll(self, feats, embs):
            return [one["final"][0, t + i].float()[None] for i in range(1, 4)]

    got = attention_hits(Oracle(), one, emb, w, vocab, 20, 3, 1.2, 1024)
    assert got["positions"] == 64 - 3 - 1 - 19
    assert all(hits >= 0.9 * got["positions"] for hits in got["top1"]), got
    blind = attention_hits(trainer.module.eval(), one, emb, w, vocab, 20, 3, 1.2, 1024)
    for top1, top3, oracle in zip(blind["top1"], blind["top3"], got["top1"], strict=True):
        assert 0 <= top1 <= top3 <= blind["positions"] and top1 < oracle

"""The drafter learns what the engine verifies: the teacher's distribution is penalised over the
text's own window exactly as the engine's PenaltyWindow penalises the target, and the drafter's
own scores are penalised the same way before the loss and in its accuracy."""

from __future__ import annotations

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from swiftwriter.engine.decoding.logits import PenaltyWindow, penalise
from swiftwriter.training import accuracy, features
from swiftwriter.training.features import extract_rows, window_presence
from swiftwriter.training.train import Trainer, TrainSettings

from tests.training.test_drafters import own_text


def test_window_presence_is_the_set_of_the_last_window_tokens():
    g = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, 50, (3, 40), generator=g)
    rows = torch.tensor([0, 1, 2, 2, 1])
    positions = torch.tensor([0, 5, 39, 12, 30])
    got = window_presence(tokens, rows, positions, 7, None, 50)
    for b, (r, p) in enumerate(zip(rows.tolist(), positions.tolist(), strict=True)):
        want = torch.zeros(50, dtype=torch.bool)
        want[tokens[r, max(0, p - 6) : p + 1]] = True
        assert torch.equal(got[b], want), b
    # mapped into a smaller vocabulary: ids without a column are left out
    index = torch.full((50,), -1)
    index[torch.arange(0, 50, 2)] = torch.arange(25)
    mapped = window_presence(tokens, rows, positions, 7, index, 25)
    assert torch.equal(mapped, got[:, 0::2])


@pytest.mark.parametrize("window", [5, 1024])
def test_the_teachers_first_choice_is_the_engines_penalised_choice(tiny_llama, window):
    rows = own_text(tiny_llama, rows=2, length=48)
    data = extract_rows(tiny_llama, rows, penalty=1.3, window=window)
    raw = extract_rows(tiny_llama, rows)
    changed = 0
    with torch.no_grad():
        logits = tiny_llama(rows).logits.float()
    for r in range(rows.shape[0]):
        pw = PenaltyWindow(logits.shape[-1], window)
        for t in range(rows.shape[1]):
            pw.extend([int(rows[r, t])])
            want = int(penalise(logits[r, t], pw.presence(), 1.3).argmax())
            assert int(data["top_ids"][r, t, 0]) == want, (r, t)
            changed += want != int(raw["top_ids"][r, t, 0])
    assert changed > 0  # the penalty does change the choice somewhere on this text


def test_features_made_for_another_penalty_are_made_again(tiny_llama, tmp_path):
    rows = own_text(tiny_llama, rows=2, length=24).to(torch.int32)
    text = tmp_path / "text-00000.safetensors"
    save_file({"tokens": rows}, str(text))
    (path,) = features.ensure_features(tiny_llama, [text], penalty=1.0)
    stamp = path.stat().st_mtime_ns
    features.ensure_features(tiny_llama, [text], penalty=1.0)
    assert path.stat().st_mtime_ns == stamp  # kept
    features.ensure_features(tiny_llama, [text], penalty=1.2, window=64)
    with safe_open(str(path), framework="pt") as f:
        assert f.metadata() == {"penalty": "1.2", "window": "64"}


def test_the_drafters_scores_are_penalised_like_the_sources(tiny_llama):
    rows = own_text(tiny_llama, rows=3, length=40)
    data = extract_rows(tiny_llama, rows, penalty=1.2)
    data["tokens"] = rows
    settings = TrainSettings(steps=1, batch=8, draft_vocab=128, val_rows=1, window=16)
    trainer = Trainer(tiny_llama, "tiny", data, settings)
    r, t = torch.tensor([0, 1]), torch.tensor([20, 30])
    state = torch.randn(2, tiny_llama.config.hidden_size)
    got = trainer.draft_logits(state, r, t)
    plain = state @ trainer.w.T
    for b in range(2):
        pw = PenaltyWindow(tiny_llama.config.vocab_size, 16)
        pw.extend(rows[r[b], : t[b] + 1].tolist())
        want = penalise(plain[b], pw.presence()[trainer.vocab], 1.2)
        torch.testing.assert_close(got[b], want)
    # validation counts hits against the penalised teacher with the penalised scores
    hits = trainer.validate()
    assert len(hits["top1"]) == settings.depth and hits["positions"] > 0
    assert all(a <= b for a, b in zip(hits["top1"], hits["top3"], strict=True))


def test_accuracy_on_a_text_counts_the_written_positions_only(tiny_llama):
    from swiftwriter.engine.decoding.drafter_files import DrafterBundle
    from swiftwriter.engine.decoding.drafters import build

    ids = own_text(tiny_llama, rows=1, length=60)[0].tolist()
    hidden = tiny_llama.config.hidden_size
    module = build("recurrent", hidden, eps=1e-5, intermediate=2 * hidden)
    vocab = torch.arange(tiny_llama.config.vocab_size)
    bundle = DrafterBundle(module, vocab, {"kind": "recurrent"})
    whole = accuracy.on_text(tiny_llama, bundle, ids, 1, 1.2, 1024)
    tail = accuracy.on_text(tiny_llama, bundle, ids, 40, 1.2, 1024)
    assert whole["positions"] == len(ids) - 3 - 1
    assert tail["positions"] == len(ids) - 3 - 1 - 39

"""Training a drafter on a tiny model: stopped after N steps (Ctrl+C or the app's Cancel) and
run again, it continues from its checkpoint to exactly the drafter an uninterrupted run makes;
a checkpoint of another model is refused; each stage's time left is extrapolated from its first
units without the first one (set-up); the model's writing reports progress within a batch."""

from __future__ import annotations

import json

import pytest
import torch
from swiftwriter.errors import UserError
from swiftwriter.training import selfdistill
from swiftwriter.training.eta import StageEstimate, duration
from swiftwriter.training.features import extract_rows
from swiftwriter.training.train import Trainer, TrainSettings, train

from tests.conftest import build_tiny

SETTINGS = TrainSettings(
    kind="recurrent", steps=10, batch=32, draft_vocab=64, warmup=2, val_rows=1, checkpoint_every=3
)


@pytest.fixture(scope="module")
def model():
    return build_tiny("llama", vocab=96, seed=11)


@pytest.fixture(scope="module")
def data(model):
    rows = torch.randint(2, 96, (4, 24), generator=torch.Generator().manual_seed(4))
    found = extract_rows(model, rows, penalty=SETTINGS.penalty, window=SETTINGS.window)
    found["tokens"] = rows
    return found


def weights(bundle) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in bundle.module.state_dict().items()}


@pytest.mark.parametrize("how", ["ctrl-c", "cancel"])
def test_a_stopped_run_resumes_to_the_uninterrupted_result(model, data, tmp_path, how):
    whole = weights(train(model, "tiny", data, tmp_path / "whole", SETTINGS))
    out = tmp_path / "stopped"
    if how == "ctrl-c":

        def interrupt(done, total, loss):
            if done == 4:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            train(model, "tiny", data, out, SETTINGS, on_progress=interrupt)
    else:
        seen = []
        stopped = train(
            model,
            "tiny",
            data,
            out,
            SETTINGS,
            on_progress=lambda done, total, loss: seen.append(done),
            should_stop=lambda: len(seen) >= 4,
        )
        assert stopped is None
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["step"] == 4 and state["model"] == "tiny"  # not a multiple of checkpoint_every
    assert not (out / "card.json").exists()
    bundle = train(model, "tiny", data, out, SETTINGS)
    assert bundle.card["training"]["resumed_from_step"] == 4
    resumed = weights(bundle)
    assert resumed.keys() == whole.keys()
    for name, value in whole.items():
        assert torch.equal(resumed[name], value), name


def test_a_checkpoint_of_another_model_is_refused(model, data, tmp_path):
    short = TrainSettings(**{**SETTINGS.__dict__, "steps": 2})
    train(model, "tiny", data, tmp_path, short)
    other = Trainer(model, "another-model", data, short)
    with pytest.raises(UserError, match="belongs to model 'tiny', not to 'another-model'"):
        other.resume(tmp_path / "checkpoint")


def test_the_estimate_leaves_out_the_first_unit_and_extrapolates_the_next():
    now = [0.0]
    estimate = StageEstimate(measure=5, clock=lambda: now[0])
    said = []
    for step in range(1, 101):
        now[0] += 30.0 if step == 1 else 2.0  # the first step carries the set-up
        said.append(estimate.update(step, 100))
    assert said[:6] == [None] * 5 + [2.0 * 94]  # after steps 2..6: 94 steps at 2 s
    assert all(s is None for s in said[6:])  # said once
    assert estimate.measured == 5
    assert duration(188) == "about 3 min" and duration(40) == "about 40 s"
    assert duration(3 * 3600 + 1200) == "about 3 h 20 min"


def test_a_stage_resumed_near_its_end_estimates_from_what_is_left():
    now = [0.0]
    estimate = StageEstimate(measure=5, clock=lambda: now[0])
    said = []
    for step in (97, 98, 99):
        now[0] += 1.0
        said.append(estimate.update(step, 100))
    assert said == [None, None, 1.0]  # two steps measured at 1 s, one left


class _Tokenizer:
    """Six ids per opener: every row the same length, no padding needed."""

    padding_side, pad_token, eos_token = "right", None, "<eos>"

    def __call__(self, texts, return_tensors="pt", padding=True):
        from transformers import BatchEncoding

        ids = torch.tensor([[2 + ord(c) % 90 for c in text[:6].ljust(6)] for text in texts])
        return BatchEncoding({"input_ids": ids, "attention_mask": torch.ones_like(ids)})


def test_the_models_writing_reports_progress_within_a_batch(model, tmp_path):
    model.generation_config.eos_token_id = None
    seen = []
    total = 2 * 32 * 2  # two batches of two rows of 32 tokens
    selfdistill.write_text(
        model,
        _Tokenizer(),
        tmp_path,
        total,
        batch=2,
        length=32,
        on_progress=lambda done, t: seen.append((done, t)),
    )
    first_batch = [done for done, _ in seen if done < 64]
    assert len(first_batch) >= 30  # token by token, not once per batch
    assert first_batch == sorted(first_batch)
    assert seen[-1] == (total, total)

"""Drafting heads in the app: the model manager reads each model's drafter card (present,
missing, mismatched; trained here or shipped; held-out top-1 per head), Train heads… trains a
tiny drafter in a worker thread with progress and the app drafts with it at once, Cancel stops
between two steps and keeps a checkpoint that the next training resumes, and errors are
messages."""

from __future__ import annotations

import json
import random

import pytest
from swiftwriter.writing.endings import allowance_for

from tests.ui.conftest import WORDS, tiny_loaded

WAIT = 60000


@pytest.fixture
def registered(tmp_path):
    """A fresh tiny model, registered as a user model folder (so the manager lists it) and
    loaded in memory with the word tokenizer, the way the app holds its model."""
    from swiftwriter.modelstore import registry

    loaded = tiny_loaded(seed=7)
    folder = tmp_path / "tiny-heads-model"
    loaded.model.save_pretrained(folder)
    loaded.entry = registry.add_user_model("tiny-heads", folder)
    return loaded


def save_drafter(loaded, folder, kind="linear", **card_changes):
    import torch
    from swiftwriter.engine.decoding import drafter_files as files
    from swiftwriter.engine.decoding import drafters

    hidden = loaded.model.config.hidden_size
    torch.manual_seed(0)
    module = drafters.build(kind, hidden, eps=1e-5, n_heads=3, intermediate=2 * hidden)
    vocab = torch.arange(loaded.model.config.vocab_size)
    card = files.make_card(loaded.model, kind, loaded.entry.id, vocab, eps=1e-5, n_heads=3,
                           intermediate=2 * hidden,
                           validation={"top1": [0.61, 0.34, 0.2], "top3": [0.8, 0.5, 0.3]})  # fmt: skip
    card.update(card_changes)
    files.save(folder, files.DrafterBundle(module, vocab, card))


def row_of(dialog, model_id):
    rows = [r for r in range(dialog.table.rowCount()) if dialog.table.item(r, 1).text() == model_id]
    assert len(rows) == 1
    return rows[0]


def training_text(tmp_path, n_words=64 * 6, seed=0):
    rng = random.Random(seed)
    path = tmp_path / "training.txt"
    path.write_text(" ".join(rng.choice(WORDS[:60]) for _ in range(n_words)), encoding="utf-8")
    return path


def test_the_card_names_agree_with_the_engine():
    from swiftwriter.engine.decoding import drafter_files as files
    from swiftwriter.ui import model_manager

    assert (model_manager.CARD, model_manager.WEIGHTS, model_manager.FORMAT) == (
        files.CARD,
        files.WEIGHTS,
        files.FORMAT,
    )


def test_heads_missing_present_mismatched_here_and_shipped(registered, tmp_path, monkeypatch):
    from swiftwriter.modelstore.registry import ModelEntry
    from swiftwriter.ui.heads_training import heads_folder
    from swiftwriter.ui.model_manager import heads_info, heads_state

    entry = registered.entry
    assert heads_state(entry) == "missing" and heads_state(entry, registered) == "missing"
    here = heads_folder(entry.id)
    save_drafter(registered, here)
    info = heads_info(entry)
    assert (info.state, info.where, info.kind, info.folder) == ("present", "trained here",
                                                                "linear", here)  # fmt: skip
    assert info.top1 == [0.61, 0.34, 0.2]
    assert info.detail() == "trained here · linear · top-1 61% · 34% · 20%"
    assert heads_state(entry, registered) == "present"  # checked by loading it on the model

    save_drafter(registered, here, hidden_size=64)  # a card for another model
    info = heads_info(entry)
    assert info.state == "mismatched" and "hidden size 64 vs the model's 32" in info.why
    loaded_check = heads_info(entry, registered)
    assert loaded_check.state == "mismatched" and "does not fit this model" in loaded_check.why
    save_drafter(registered, here, config_hash="0" * 16)  # only a full check sees this one
    assert heads_state(entry) == "present" and heads_state(entry, registered) == "mismatched"
    (here / "card.json").write_text("{not json")
    assert heads_state(entry) == "mismatched"

    shipped = tmp_path / "shipped-heads"
    save_drafter(registered, shipped, kind="recurrent")
    monkeypatch.setattr(ModelEntry, "heads_dir", lambda self: shipped)
    info = heads_info(entry)
    assert info.state == "mismatched" and info.where == "trained here"  # here comes first
    for path in here.iterdir():
        path.unlink()
    info = heads_info(entry, registered)
    assert (info.state, info.where, info.kind) == ("present", "shipped", "recurrent")
    (shipped / "drafter.safetensors").unlink()
    assert heads_info(entry).why == "drafter.safetensors is missing"


def test_the_manager_shows_the_heads_of_each_model(qtbot, window, registered):
    from swiftwriter.ui.heads_training import heads_folder

    window.models.set_model(registered)
    dialog = window.models.open_models()
    qtbot.addWidget(dialog)
    row = row_of(dialog, "tiny-heads")
    assert dialog.table.item(row, 3).text() == "missing"
    assert "Train heads" in dialog.table.item(row, 4).text()
    save_drafter(registered, heads_folder("tiny-heads"))
    dialog.reload()
    assert dialog.table.item(row, 3).text() == "present"
    assert dialog.table.item(row, 4).text() == "trained here · linear · top-1 61% · 34% · 20%"
    assert str(heads_folder("tiny-heads")) in dialog.table.item(row, 3).toolTip()
    save_drafter(registered, heads_folder("tiny-heads"), vocab_size=999)
    dialog.reload()
    assert dialog.table.item(row, 3).text() == "mismatched"
    assert "vocabulary 999" in dialog.table.item(row, 4).text()
    dialog.table.selectRow(row)
    assert dialog.train_button.isEnabled()  # a ready model
    default_row = row_of(dialog, dialog.entries[0].id)
    dialog.table.selectRow(default_row)  # the shipped model, not converted here
    assert not dialog.train_button.isEnabled()


def test_train_heads_runs_and_the_app_drafts_with_them(qtbot, window, registered, tmp_path,
                                                      make_project):  # fmt: skip
    from swiftwriter.ui.heads_training import heads_folder

    window.models.set_model(registered)
    window.projects.open_project(make_project())
    assert registered.drafter is None
    dialog = window.models.open_models()
    qtbot.addWidget(dialog)
    dialog.table.selectRow(row_of(dialog, "tiny-heads"))
    trainer = dialog.train_selected()
    assert trainer.tokens.value() == 200_000 and trainer.kind.currentText().startswith("Recur")
    trainer.tokens.setValue(0)
    assert not trainer.start()
    assert "Give training text" in trainer.message.text()
    trainer.add_files([str(training_text(tmp_path))])
    trainer.row_length, trainer.batch = 64, 64
    trainer.steps.setValue(25)
    assert trainer.start()
    assert trainer.running and trainer.cancel_button.isEnabled()
    assert not dialog.train_button.isEnabled()
    assert "training" in window.takes.can_generate()  # the model is shared meanwhile
    assert not window.actions_by_name["generate"].isEnabled()
    qtbot.waitUntil(lambda: not trainer.running, timeout=WAIT)
    assert trainer.message.text().startswith("Trained: recurrent heads saved in"), (
        trainer.message.text()
    )
    assert trainer.stage.text().startswith("Training: 25 / 25 · loss ")
    card = json.loads((heads_folder("tiny-heads") / "card.json").read_text())
    assert card["kind"] == "recurrent" and card["training"]["steps"] == 25
    assert len(card["validation"]["top1"]) == 3
    row = row_of(dialog, "tiny-heads")
    assert dialog.table.item(row, 3).text() == "present"
    assert dialog.table.item(row, 4).text().startswith("trained here · recurrent · top-1 ")
    assert registered.drafter is not None  # picked up by the app's model at once
    assert registered.drafter_status == f"present: {heads_folder('tiny-heads')}"
    assert not window.model_training and window.takes.can_generate() == ""
    window.takes.measure_baseline = False
    window.panel.set_target(24, "tokens")
    with qtbot.waitSignal(window.takes.finished, timeout=WAIT) as blocker:
        window.takes.generate()
    qtbot.waitUntil(lambda: not window.takes.busy, timeout=WAIT)
    assert 24 <= blocker.args[0]["stats"]["tokens"] <= 24 + allowance_for(24)


def test_cancel_keeps_a_checkpoint_that_the_next_training_resumes(qtbot, window, registered,
                                                                 tmp_path):  # fmt: skip
    from swiftwriter.ui.heads_training import heads_folder

    window.models.set_model(registered)
    dialog = window.models.open_models()
    qtbot.addWidget(dialog)
    dialog.table.selectRow(row_of(dialog, "tiny-heads"))
    trainer = dialog.train_selected()
    trainer.tokens.setValue(0)
    trainer.add_files([str(training_text(tmp_path))])
    trainer.row_length, trainer.batch = 64, 64
    trainer.kind.setCurrentIndex(1)  # linear: TokenSwift's heads
    trainer.steps.setValue(1_000_000)
    assert trainer.start()
    qtbot.waitUntil(lambda: trainer.stage.text().startswith("Training: "), timeout=WAIT)
    trainer.cancel()
    qtbot.waitUntil(lambda: not trainer.running, timeout=WAIT)
    assert trainer.message.text().startswith("Stopped. What was done is kept")
    folder = heads_folder("tiny-heads")
    state = json.loads((folder / "checkpoint" / "state.json").read_text())
    assert 0 < state["step"] < 1_000_000 and state["settings"]["kind"] == "linear"
    assert not (folder / "card.json").exists()
    assert registered.drafter is None and not window.model_training

    trainer.close()
    again = dialog.train_selected()
    assert again is not trainer and "Train resumes it" in again.message.text()
    again.tokens.setValue(0)
    again.add_files([str(training_text(tmp_path))])
    again.row_length, again.batch = 64, 64
    again.kind.setCurrentIndex(1)
    again.steps.setValue(state["step"] + 5)
    assert again.start()
    qtbot.waitUntil(lambda: not again.running, timeout=WAIT)
    card = json.loads((folder / "card.json").read_text())
    assert card["training"]["resumed_from_step"] == state["step"]
    assert registered.drafter is not None and registered.drafter.kind == "linear"


def test_training_errors_are_messages(qtbot, window, registered, tmp_path):
    window.models.set_model(registered)
    dialog = window.models.open_models()
    qtbot.addWidget(dialog)
    dialog.table.selectRow(row_of(dialog, "tiny-heads"))
    trainer = dialog.train_selected()
    trainer.tokens.setValue(0)
    trainer.add_files([str(training_text(tmp_path, n_words=50))])  # less than two rows
    trainer.row_length = 64
    assert trainer.start()
    qtbot.waitUntil(lambda: not trainer.running, timeout=WAIT)
    assert trainer.message.text().startswith("Training failed: The training files hold 50 tokens")
    trainer.files.clear()
    trainer.add_files([str(tmp_path / "missing.txt")])
    assert trainer.start()
    qtbot.waitUntil(lambda: not trainer.running, timeout=WAIT)
    assert "No such file" in trainer.message.text()
    assert trainer.train_button.isEnabled() and not window.model_training


def test_listing_models_never_imports_torch():
    import subprocess
    import sys

    code = (
        "import sys, swiftwriter.ui.model_manager, swiftwriter.ui.heads_training; "
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def word_level_tokenizer():
    """A Hugging Face fast tokenizer over the test words (built in memory, nothing downloaded):
    what the model's own writing (self-distillation) needs to batch its openers."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<s>", "</s>", "<unk>"] + list(dict.fromkeys(w.lower() for w in WORDS))
    vocab = {w: i for i, w in enumerate(words[:256])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )


def test_train_heads_on_the_models_own_writing(qtbot, window, registered):
    from safetensors.torch import load_file
    from swiftwriter.ui.heads_training import heads_folder

    registered.tokenizer = word_level_tokenizer()
    window.models.set_model(registered)
    dialog = window.models.open_models()
    qtbot.addWidget(dialog)
    dialog.table.selectRow(row_of(dialog, "tiny-heads"))
    trainer = dialog.train_selected()
    trainer.tokens.setValue(16 * 48)  # one shard: 16 rows of 48 tokens
    trainer.row_length, trainer.batch = 48, 64
    trainer.steps.setValue(10)
    assert trainer.start()
    qtbot.waitUntil(lambda: not trainer.running, timeout=WAIT)
    assert trainer.message.text().startswith("Trained: recurrent heads"), trainer.message.text()
    shards = sorted((heads_folder("tiny-heads") / "work").glob("text-*.safetensors"))
    assert len(shards) == 1 and load_file(str(shards[0]))["tokens"].shape == (16, 48)
    assert registered.drafter is not None

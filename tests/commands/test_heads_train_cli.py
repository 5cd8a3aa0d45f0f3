"""`swiftwriter heads train` on a tiny random model (loader replaced): it says how long training
will take once a few steps are timed, Ctrl+C keeps the progress and the same command goes on
from the checkpoint; and a model without a drafter still drafts with tokenswift's other sources,
saying so."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from swiftwriter.cli import main

from tests.commands.tiny_cli import IdTokenizer
from tests.conftest import build_tiny


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    """The tiny model as the CLI's model, its drafter looked for as the real loader does."""
    from swiftwriter.modelstore import loader, registry
    from swiftwriter.modelstore.loader import LoadedModel
    from swiftwriter.modelstore.registry import ModelEntry

    entry = ModelEntry(id="tiny", name="tiny", source="folder", path=Path("."))
    model = build_tiny("llama", vocab=64, seed=7)
    find_drafter = loader.load_drafter

    def load(*args, with_drafter=True, **kwargs):
        loaded = LoadedModel(entry, model, IdTokenizer(), "cpu", "float32")
        if with_drafter:
            loaded.drafter, loaded.drafter_status = find_drafter(loaded)
        return loaded

    monkeypatch.setattr(registry, "resolve", lambda name: entry)
    monkeypatch.setattr(loader, "load", load)
    rng = random.Random(3)
    phrases = [[rng.randrange(2, 64) for _ in range(6)] for _ in range(5)]
    text = tmp_path / "train.txt"
    text.write_text(" ".join(str(t) for _ in range(120) for t in rng.choice(phrases)))
    return tmp_path, text


def test_the_estimate_is_said_and_ctrl_c_keeps_the_progress(tiny, capsys, monkeypatch):
    from swiftwriter.commands import heads

    tmp_path, text = tiny
    out = tmp_path / "heads"
    argv = ["heads", "train", "--text", str(text), "--out", str(out), "--row-length", "48"]
    argv += ["--batch", "32", "--draft-vocab", "32", "--kind", "linear", "--steps", "16"]
    shown = heads.StageProgress.__call__

    def ctrl_c_at_step_9(self, stage, done, total, loss=None):
        shown(self, stage, done, total, loss)
        if stage == "training" and done == 9:
            raise KeyboardInterrupt

    monkeypatch.setattr(heads.StageProgress, "__call__", ctrl_c_at_step_9)
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert "training on cpu (float32)" in err
    # measured over steps 2..6 (the first carries the set-up), said before the run ends
    assert "training: about " in err and " left for 10 of 16 steps (measured over 5)" in err
    assert f"interrupted; the progress is kept in {out}: run the same command again" in err
    assert json.loads((out / "checkpoint" / "state.json").read_text())["step"] == 9
    monkeypatch.setattr(heads.StageProgress, "__call__", shown)
    assert main(argv) == 0
    card = json.loads((out / "card.json").read_text())
    assert card["training"]["resumed_from_step"] == 9 and card["training"]["steps"] == 16


def test_without_a_drafter_tokenswift_drafts_from_its_other_sources(tiny, capsys):
    tmp_path, text = tiny
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(text.read_text()[:300])
    assert main(["generate", "--prompt-file", str(prompt), "--max-new-tokens", "24"]) == 0
    err = capsys.readouterr().err
    assert "drafter: missing; tokenswift drafts from the n-gram and suffix sources" in err
    report = tmp_path / "bench.json"
    bench = ["bench", "--prompt-file", str(prompt), "--max-new-tokens", "48"]
    assert main([*bench, "--methods", "hf,tokenswift", "--json", str(report)]) == 0
    assert (
        "drafter: missing; tokenswift drafts from the n-gram and suffix" in capsys.readouterr().err
    )
    run = json.loads(report.read_text())["methods"]["tokenswift"]
    assert run["identical_to_hf"] is True and "heads" not in run["accepted_by_source"]


def test_the_other_sources_draft_and_are_accepted_without_a_drafter():
    """The app's sources with the heads among them and no drafter: every step drafts (the cost
    model off, so a busy machine cannot decide not to), n-gram and suffix drafts are accepted,
    and the text is plain decoding's."""
    from swiftwriter.engine import DraftSettings, Generator, SamplingSettings

    model = build_tiny("llama", vocab=64, seed=7)
    rng = random.Random(3)
    phrases = [[rng.randrange(2, 64) for _ in range(6)] for _ in range(5)]
    prompt = [t for _ in range(40) for t in rng.choice(phrases)]
    sampling = SamplingSettings(greedy=True, penalty=1.2, window=64)
    drafting = DraftSettings(sources=("heads", "ngram", "suffix"), adaptive=False)
    plain = Generator(model, sampling, DraftSettings.plain(), calibrate=False)
    want = [t for ev in plain.generate(prompt, 64) for t in ev.tokens]
    ours = Generator(model, sampling, drafting, calibrate=False, drafter=None)
    got = [t for ev in ours.generate(prompt, 64) for t in ev.tokens]
    assert got == want
    accepted = ours.stats.accepted_by_source
    assert "heads" not in accepted
    assert accepted["ngram"] + accepted["suffix"] > 0, accepted

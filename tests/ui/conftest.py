"""UI fixtures: settings, config and data folders in a temporary place, a word-level fake
tokenizer (so tiny random models write words, not bytes), and a main window on a tiny model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import build_tiny

_WORD_TEXT = (
    "the a and of to in was her his she he it that with on for as at by from they had were "
    "but not into over under again then when where while sea harbour wall town boat boats "
    "tide tides storm storms wind rain light lamp lamps stone stones street streets church "
    "quarry headland evening morning night winter summer years hour hours old young man men "
    "woman women child children door window road house houses roof roofs letter key kitchen "
    "table chair fire bread salt tar rope net nets gull gulls water waves shore sand cliff "
    "path gate garden bell voice voices silence smoke grey blue green dark quiet cold warm "
    "long short slow soft hard narrow wide empty full small great little last first next "
    "came went looked said knew thought turned walked stood sat held kept found left heard "
    "saw watched waited opened closed carried remembered wondered listened spoke smiled "
    "Elena Marsh Tom Pender Aldermouth Anchor mother father sister brother friend stranger "
    "always never once still only almost perhaps already soon slowly quietly suddenly "
    "nothing something everything anyone someone nobody everyone far near behind beside "
    "above below across along toward through around without within upon because though "
    "if so yet nor or about after before since until this these those there here now "
    "rain-dark half-light sea-wall boat-house lamp-post fish fishing boatmen harbourmaster "
    "morning-tide river bridge moon stars mist island coast pier sails ships lantern"
    " morning evening shadow shadows coat boots hands eyes face hair heart breath step steps"
    " name story place home shop inn market square bench"
)
WORDS = _WORD_TEXT.split()


class WordTokenizer:
    """Token id = a word (0 is BOS, 1 is EOS): tiny random models then write readable
    word salad, which keeps screenshots calm. Unknown words map to a stable id."""

    identity = "ui-words-test"
    bos_token_id = 0
    eos_token_id = None

    def __init__(self, vocab: int = 256):
        words = list(dict.fromkeys(WORDS))
        self.words = ["", ""] + words[: vocab - 2]
        while len(self.words) < vocab:
            self.words.append(f"w{len(self.words)}")
        self.index = {w: i for i, w in enumerate(self.words) if i >= 2}

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, text, add_special_tokens=False):
        out = []
        for word in re.findall(r"\S+", text):
            key = word.strip(".,;:!?\"'()").lower() or word
            out.append(self.index.get(key, 2 + sum(map(ord, key)) % (len(self.words) - 2)))
        return out

    def decode(self, ids, skip_special_tokens=True):
        return "".join(" " + self.words[i] for i in ids if i >= 2)


def tiny_loaded(seed: int = 5, max_positions: int = 4096):
    from swiftwriter.modelstore.loader import LoadedModel
    from swiftwriter.modelstore.registry import ModelEntry

    model = build_tiny("llama", vocab=256, seed=seed, max_positions=max_positions)
    model.config.eos_token_id = None  # never stop early: the tests decide the length
    model.generation_config.eos_token_id = None
    entry = ModelEntry(id="tiny-words", name="Tiny test model", source="folder", path=Path("."))
    return LoadedModel(entry=entry, model=model, tokenizer=WordTokenizer(), device="cpu",
                       dtype="float32")  # fmt: skip


@pytest.fixture(autouse=True)
def isolated_settings(tmp_path, monkeypatch):
    """Never read or write the writer's real settings, models or data."""
    monkeypatch.setenv("SWIFTWRITER_SETTINGS_PATH", str(tmp_path / "settings.ini"))
    monkeypatch.setenv("SWIFTWRITER_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("SWIFTWRITER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SWIFTWRITER_MODELS_DIR", str(tmp_path / "data" / "models"))


@pytest.fixture(scope="session")
def tiny_words():
    """The tiny model, its passes' one-time set-up done: the tree-attention kernel is built
    (about a minute on two cores where the cache lacks it) or loaded here, not inside the first
    take of the session, whose test would wait for its first tokens for as long."""
    from swiftwriter.engine.passes import native

    native.tree_attention()
    return tiny_loaded()


@pytest.fixture
def make_project(tmp_path):
    from swiftwriter.store import Project

    def make(name="Novel", docs=(("Chapter 1", "The sea was grey and the wall was old."),),
             notes=(("Cast", "Elena Marsh", True),)):  # fmt: skip
        path = tmp_path / f"{name}.swiftwriter"
        with Project.create(path, title=name) as proj:
            for title, text in docs:
                proj.add_document(title, text)
            for title, text, pinned in notes:
                proj.add_note(title, text, pinned=pinned)
        return path

    return make


@pytest.fixture
def window(qtbot, tiny_words):
    from swiftwriter.ui.main_window import MainWindow

    win = MainWindow(load_model=False)
    win.ask = lambda title, text: True
    win.tree.confirm = win.ask
    win.models.set_model(tiny_words)
    win.panel.precise.setChecked(
        True
    )  # the tests compare texts: greedy (the app's default samples)
    win.panel.set_target(40, "tokens")
    qtbot.addWidget(win)
    win.show()
    yield win
    win.takes.stop()
    win.takes.wait(20000)
    qtbot.waitUntil(lambda: not win.takes.busy, timeout=20000)
    win.projects.close_project()

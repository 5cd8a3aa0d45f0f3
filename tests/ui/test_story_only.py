"""The "Keep to the story" option: the take bans the loaded model's chatter-only tokens (headings' #,
bold's **, code fences, chat markers) and those that write letters in scripts the writer's text
does not use, its end of text kept; unticked, nothing is banned. The choice sticks with the
project's panel settings."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from PySide6.QtGui import QTextCursor
from swiftwriter.ui.panel_state import apply_state, state_of
from swiftwriter.ui.takes import take_request
from swiftwriter.writing.guards import story_only_bans
from swiftwriter.writing.take import story_sampling

HEBREW_DALET = "×ĵ"  # "ד" (bytes d7 93) as a byte-level vocabulary spells it
PIECES = ["<|im_end|>", "Ġthe", "##", "**", "Ġsea", "```", "<|im_start|>", "Ġ#", HEBREW_DALET]


class _Tokenizer:
    eos_token_id = 0

    def __len__(self):
        return len(PIECES)

    def convert_ids_to_tokens(self, ids):
        return [PIECES[i] for i in ids]


def _loaded():
    model = SimpleNamespace(
        get_output_embeddings=lambda: SimpleNamespace(weight=torch.zeros(len(PIECES), 2)),
        generation_config=SimpleNamespace(eos_token_id=[0]),
    )
    return SimpleNamespace(model=model, tokenizer=_Tokenizer(), story_bans={})


def test_the_marks_only_chatter_writes_are_banned_the_end_of_text_kept():
    loaded = _loaded()
    assert story_only_bans(loaded) == (2, 3, 5, 6, 7)  # no text: no scripts to keep to
    assert story_only_bans(loaded) is story_only_bans(loaded)  # worked out once
    assert story_only_bans(loaded, "The sea.") == (2, 3, 5, 6, 7, 8)
    assert story_only_bans(loaded, "The sea. הים") == (2, 3, 5, 6, 7)
    assert story_only_bans(loaded, "The tide.") is story_only_bans(loaded, "The sea.")


def test_keep_to_the_story_bans_them_in_the_take_and_sticks(qtbot, window):
    """The request says so, and the take works the bans out in its own thread (story_sampling
    in Take.run: 0.2 s for a real vocabulary, too long for the GUI thread)."""
    window.loaded_model = _loaded()
    panel = window.panel
    panel.history.setChecked(False)
    assert not take_request(window).keep_to_story
    panel.story_only.setChecked(True)
    request = take_request(window)
    assert request.keep_to_story and request.sampling.banned_tokens == ()
    assert story_sampling(request).banned_tokens == (2, 3, 5, 6, 7)
    window.editor.setPlainText("The ferry left at dawn.")
    window.editor.moveCursor(QTextCursor.MoveOperation.End)
    assert story_sampling(take_request(window)).banned_tokens == (2, 3, 5, 6, 7, 8)  # no Hebrew
    panel.direction.setText("Rivka says: שלום")  # the direction is the writer's text too
    assert story_sampling(take_request(window)).banned_tokens == (2, 3, 5, 6, 7)
    state = state_of(panel)
    panel.story_only.setChecked(False)
    assert "story_only" in apply_state(panel, state) and panel.story_only.isChecked()

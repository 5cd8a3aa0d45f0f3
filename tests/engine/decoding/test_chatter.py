"""The chatter measure on lines written by hand: the story's own lines pass, an assistant's
voice is caught, and the rate is the share of words in chatter lines."""

from __future__ import annotations

import pytest
from swiftwriter.engine.decoding.chatter import (
    banned_tokens,
    classify,
    examples,
    measure,
    narration,
)

STORY = [
    "The tide came in over the mud flats, slow and grey, and the boats lifted one by one.",
    '"Let me know when you are back," she said, and shut the door.',
    "Was it him, after all these years? She could not tell.",
    "Here is the harbour where my father drowned.",
    "“Do you remember the storm?” Tom asked.",
    "`Of course,' the Dodo replied. `What else have you got in your pocket?' he went on.",
    "Of course the lamp had failed; it always failed in March.",
    "Certainly nobody in Aldermouth would have said so.",
    "She counted the boats: 1. The Heron, then the Gull.",
]
CHATTER = [
    ("I hope this helps! Let me know if you want another chapter.", {"assistant"}),
    ("Certainly! Here is the next part of the story:", {"assistant"}),
    ("Here's a continuation of the story:", {"assistant"}),
    ("As an AI language model, I cannot write about real people.", {"assistant"}),
    ("Feel free to ask if you have any other questions.", {"assistant"}),
    ("Q: What happens to Tom?", {"qa"}),
    ("Answer: He leaves on the Tuesday boat.", {"qa"}),
    ("User: write more", {"qa"}),
    ("<|im_start|>user", {"qa"}),
    ("What do you think Elena will do next?", {"reader"}),
    ("Dear reader, the story is not over.", {"reader"}),
    ("## Chapter 4: The Return", {"markdown"}),
    ("- Elena climbs the tower", {"markdown"}),
    ("2. Tom arrives on the boat", {"markdown"}),
    ("**The End**", {"markdown"}),
    ("---", {"markdown"}),
]


@pytest.mark.parametrize("line", STORY)
def test_the_story_s_own_lines_pass(line):
    assert classify(line) == set()


@pytest.mark.parametrize(("line", "kinds"), CHATTER)
def test_an_assistant_s_voice_is_caught(line, kinds):
    assert classify(line) == kinds


def test_quoted_speech_is_set_aside_even_unclosed():
    told = narration('He said "I hope this helps" and left.')
    assert told.split() == ["He", "said", "and", "left."]
    assert classify('"I hope this helps, and let me know') == set()


def test_measure_counts_words_in_chatter_lines():
    text = (
        "The boats lifted one by one.\n\n"  # 6 words
        "I hope this helps!\n"  # 4 words, assistant
        "## The End\n"  # 2 words, markdown
        "   \n"
    )
    m = measure(text)
    assert (m["lines"], m["words"], m["chatter_lines"], m["chatter_words"]) == (3, 12, 2, 6)
    assert m["rate"] == 0.5
    assert m["by_kind"] == {"assistant": 1, "qa": 0, "reader": 0, "markdown": 1}
    assert measure("")["rate"] is None
    assert measure("\n".join(STORY))["rate"] == 0.0
    assert examples(text) == ["I hope this helps!", "## The End"]


def test_banned_tokens_are_the_marks_no_story_needs():
    pieces = [
        "<|endoftext|>",
        "the",
        "Ġ###",
        "**",
        "Ġsea",
        "<|im_start|>",
        "<|im_end|>",
        "```",
        "?",
    ]
    assert banned_tokens(pieces, keep=[6]) == (0, 2, 3, 5, 7)
    assert banned_tokens(["Ġtide", "Ġ.", "'s"]) == ()

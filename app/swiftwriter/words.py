"""Words as a writer counts them, and how many tokens a word takes with a given tokenizer (a
length asked in words becomes a token budget)."""

from __future__ import annotations

import re

_LETTER = re.compile(r"\w")  # a scene break (#, * * *) or a lone dash is no word
DEFAULT_TOKENS_PER_WORD = 1.4
SAMPLE_CHARS = 4000  # the writer's recent text a word's tokens are measured on


def count_words(text: str) -> int:
    """Whitespace-separated pieces holding a letter or digit (linear in the text's length)."""
    return sum(1 for piece in text.split() if _LETTER.search(piece))


def tokens_per_word(encode, text: str) -> float:
    """Measured on the writer's own recent text with this tokenizer; a typical ratio if short."""
    sample = text[-SAMPLE_CHARS:]
    words = count_words(sample)
    if words < 30:
        return DEFAULT_TOKENS_PER_WORD
    return max(1.0, len(encode(sample)) / words)


class WordTally:
    """`count_words` of a text that arrives in pieces, kept as it grows (a take's words as it
    streams): only the last, unfinished piece is looked at again."""

    def __init__(self) -> None:
        self.words = 0  # finished pieces holding a letter or digit
        self._open = ""  # the text after the last whitespace: a word still being written

    def push(self, text: str) -> None:
        if not text:
            return
        pieces = (self._open + text).split()
        if text[-1].isspace():
            self._open = ""
        else:
            self._open = pieces.pop() if pieces else ""
        self.words += sum(1 for piece in pieces if _LETTER.search(piece))

    @property
    def total(self) -> int:
        return self.words + (1 if _LETTER.search(self._open) else 0)

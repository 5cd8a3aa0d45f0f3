"""Spell checking for the editor, without Qt: which words of a line are misspelt, and the
likeliest corrections. Dictionaries come with pyspellchecker (English, German, French,
Spanish, Italian, Portuguese, Dutch, Russian, ...); the writer's own words (names, invented
places) are kept in a word list. English accepts British spellings (colour, realise, centre,
travelled) where the American form is in the dictionary. A capitalised word is taken for a
name (and left alone) where it stands inside a sentence, or where the project uses it as one;
at the start of a sentence it is checked like any other, so 'Teh first boat' is caught."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from swiftwriter.export.files import write_atomically

LANGUAGES = ("en", "de", "fr", "es", "it", "pt", "nl", "ru")
WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
# Before a sentence's first word: space, opening quotes, brackets, emphasis, a heading's or a
# list item's mark; after the end of the one before: its mark and closing quotes or brackets.
_OPENING = r"[\s\"'“‘«(\[*_#>\-–—\d.)]*"
_PARAGRAPH_START = re.compile(_OPENING)
_SENTENCE_END = re.compile(r"[.!?…][\"'”’»)\]*_]*\s" + _OPENING + "$")
# Words a full stop follows without ending the sentence (Mr. Pender, St. Ives).
_ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "st", "mt", "prof", "capt", "col", "gen", "lt", "sgt",
                  "rev", "fr", "jr", "sr"}  # fmt: skip
_BRITISH = (  # British ending -> American ending, tried when a word is unknown
    ("our", "or"),
    ("ours", "ors"),
    ("ise", "ize"),
    ("ised", "ized"),
    ("ises", "izes"),
    ("ising", "izing"),
    ("isation", "ization"),
    ("yse", "yze"),
    ("re", "er"),
    ("res", "ers"),
    ("ogue", "og"),
    ("elled", "eled"),
    ("elling", "eling"),
    ("ller", "ler"),
    ("ence", "ense"),
)


class Speller:
    """One language's dictionary plus the writer's own words. `problem` says, once, why
    checking is off (no dictionary for the language) instead of failing."""

    def __init__(self, language: str = "en", own_words: Iterable[str] = ()):
        self.language = language
        self.own = {w.lower() for w in own_words if w.strip()}
        self.names: set[str] = set()  # the project's names (learn_names), lower case
        self.problem = ""
        self._checker = None
        try:
            from spellchecker import SpellChecker  # lazy: optional, checking is off without it

            self._checker = SpellChecker(language=language, case_sensitive=False)
        except ImportError:
            self.problem = "Spell checking needs the pyspellchecker package"
        except (ValueError, OSError):
            self.problem = f"No spelling dictionary for '{language}': spell checking is off"

    @property
    def ready(self) -> bool:
        return self._checker is not None

    def known(self, word: str) -> bool:
        low = _base(word)
        if low in self.own or not self._checker:
            return True
        if low in self._checker:
            return True
        if self.language == "en":
            for gb, us in _BRITISH:
                if low.endswith(gb) and low[: -len(gb)] + us in self._checker:
                    return True
        return False

    def misspelt(self, text: str) -> list[tuple[int, int]]:
        """(start, end) of each misspelt word of `text` (a paragraph), in order."""
        if not self.ready:
            return []
        out = []
        for m, starts_sentence in words_of(text):
            word = m.group(0)
            if len(word) < 2 or (word[0].isupper() and self._is_name(word, starts_sentence)):
                continue
            if not self.known(word):
                out.append((m.start(), m.end()))
        return out

    def _is_name(self, word: str, starts_sentence: bool) -> bool:
        return not starts_sentence or _base(word) in self.names

    def learn_names(self, text: str, every_capital: bool = False) -> None:
        """Take the capitalised words inside the sentences of `text` for names (all of them
        with `every_capital`: a cast list starts its lines with names), so they pass at the
        start of a sentence too."""
        for paragraph in text.splitlines():
            for m, starts_sentence in words_of(paragraph):
                word = m.group(0)
                if word[0].isupper() and (every_capital or not starts_sentence):
                    self.names.add(_base(word))

    def suggestions(self, word: str, limit: int = 5) -> list[str]:
        """The likeliest corrections, most frequent first, in the word's own case."""
        if not self.ready:
            return []
        found = self._checker.candidates(word.lower()) or set()
        found.discard(word.lower())
        ranked = sorted(found, key=lambda w: (-self._checker.word_usage_frequency(w), w))
        if word[:1].isupper():
            ranked = [w.capitalize() for w in ranked]
        return ranked[:limit]

    def add(self, word: str) -> None:
        self.own.add(word.lower())


def _base(word: str) -> str:
    """The word as the dictionaries list it: lower case, without a possessive 's."""
    low = word.lower().replace("’", "'")
    return low[:-2] if low.endswith("'s") else low  # the harbour's, Elena's


def words_of(text: str):
    """Each word of a paragraph (a WORD match) with whether it starts a sentence: the first
    word, or one after a sentence's end (not after an abbreviation or an initial)."""
    previous, end = "", 0
    for m in WORD.finditer(text):
        gap = text[end : m.start()]
        if not previous:
            starts = _PARAGRAPH_START.fullmatch(gap) is not None
        else:
            starts = _SENTENCE_END.search(gap) is not None and not (
                gap[:1] == "." and (previous.lower() in _ABBREVIATIONS or _is_initial(previous))
            )
        yield m, starts
        previous, end = m.group(0), m.end()


def _is_initial(word: str) -> bool:
    return len(word) == 1 and word.isupper()


def load_words(path: Path) -> set[str]:
    try:
        return {line.strip() for line in path.read_text(encoding="utf-8").splitlines()}
    except (OSError, UnicodeDecodeError):
        return set()


def save_words(path: Path, words: Iterable[str]) -> None:
    """The writer's word list, one word per line, written atomically (the export's own safe
    write: synced, renamed into place, a full disk one clear UserError)."""
    text = "\n".join(sorted(set(words))) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))

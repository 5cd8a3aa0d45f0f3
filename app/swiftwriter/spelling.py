"""Spell checking for the editor, without Qt: which words of a line are misspelt, and the
likeliest corrections. Dictionaries come with pyspellchecker (English, German, French,
Spanish, Italian, Portuguese, Dutch, Russian, ...); the writer's own words (names, invented
places) are kept in a word list. English accepts British spellings (colour, realise, centre,
travelled) where the American form is in the dictionary. Capitalised words are left alone:
in fiction they are mostly names."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

LANGUAGES = ("en", "de", "fr", "es", "it", "pt", "nl", "ru")
WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
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
        self.problem = ""
        self._checker = None
        try:
            from spellchecker import SpellChecker

            self._checker = SpellChecker(language=language, case_sensitive=False)
        except ImportError:
            self.problem = "Spell checking needs the pyspellchecker package"
        except (ValueError, OSError):
            self.problem = f"No spelling dictionary for '{language}': spell checking is off"

    @property
    def ready(self) -> bool:
        return self._checker is not None

    def known(self, word: str) -> bool:
        low = word.lower().replace("’", "'")
        if low.endswith("'s"):  # the harbour's, Elena's
            low = low[:-2]
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
        """(start, end) of each misspelt word of `text`, in order."""
        if not self.ready:
            return []
        out = []
        for m in WORD.finditer(text):
            word = m.group(0)
            if word[0].isupper() or len(word) < 2:
                continue  # names, and the first word of a sentence written as a name would be
            if not self.known(word):
                out.append((m.start(), m.end()))
        return out

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


def load_words(path: Path) -> set[str]:
    try:
        return {line.strip() for line in path.read_text(encoding="utf-8").splitlines()}
    except (OSError, UnicodeDecodeError):
        return set()


def save_words(path: Path, words: Iterable[str]) -> None:
    """The writer's word list, one word per line, written atomically (the export's own safe
    write: synced, renamed into place, a full disk one clear UserError)."""
    from swiftwriter.export.files import write_atomically

    text = "\n".join(sorted(set(words))) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))

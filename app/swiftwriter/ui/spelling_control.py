"""Spell checking in the window: on or off (View > Check spelling, F7), the language from the
settings, the writer's own word list in the config folder, the open project's names (so a name
that starts a sentence is not taken for a misspelling), and a missing dictionary said once in
the status bar (never an error)."""

from __future__ import annotations

from PySide6.QtCore import QObject

from swiftwriter import paths
from swiftwriter.errors import UserError
from swiftwriter.spelling import Speller, load_words, save_words

WORDS_FILE = "dictionary.txt"


class SpellingControl(QObject):
    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.speller: Speller | None = None
        self._told = set()
        window.editor.word_added.connect(self.add_word)

    @property
    def words_path(self):
        return paths.config_dir() / WORDS_FILE

    def apply(self) -> None:
        """Follow the settings: on with the chosen language, or off."""
        settings, editor = self.window.settings, self.window.editor
        if not settings.spelling:
            self.speller = None
        elif self.speller is None or self.speller.language != settings.spelling_language:
            self.speller = Speller(settings.spelling_language, load_words(self.words_path))
            if self.speller.problem:
                if self.speller.problem not in self._told:  # said once, not on every start
                    self._told.add(self.speller.problem)
                    self.window.statusBar().showMessage(self.speller.problem, 10000)
                self.speller = None
            else:
                self.learn_names(self.window.project)
        editor.highlighter.set_speller(self.speller)

    def learn_names(self, project) -> None:
        """The names `project` uses: capitalised words inside its documents' sentences, and
        every capitalised word of its notes (a cast list starts its lines with names)."""
        if self.speller is None:
            return
        self.speller.names.clear()
        if project is None:
            return
        for doc in project.documents():
            self.speller.learn_names(doc.text)
        for note in project.notes():
            self.speller.learn_names(f"{note.title}\n{note.text}", every_capital=True)

    def toggle(self, on: bool) -> None:
        self.window.settings.spelling = on
        self.apply()

    def add_word(self, word: str) -> None:
        if self.speller is None:
            return
        self.speller.add(word)
        try:
            save_words(self.words_path, self.speller.own)
        except UserError as exc:  # known for this session; said, never a crash
            self.window.statusBar().showMessage(f"Could not keep “{word}”: {exc}", 10000)
        self.window.editor.highlighter.rehighlight()

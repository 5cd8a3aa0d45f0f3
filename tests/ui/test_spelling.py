"""Spell check in the editor: a misspelt word is underlined, its corrections lead the context
menu, "Add to dictionary" keeps the word (in the config folder) and clears the mark, F7 turns
checking off, and a missing dictionary is said once in the status bar."""

from __future__ import annotations

from PySide6.QtGui import QTextCharFormat

WAVY = QTextCharFormat.UnderlineStyle.SpellCheckUnderline


def underlined(window, block_no=0):
    layout = window.editor.document().findBlockByNumber(block_no).layout()
    text = window.editor.document().findBlockByNumber(block_no).text()
    return [
        text[f.start : f.start + f.length]
        for f in layout.formats()
        if f.format.underlineStyle() == WAVY
    ]


def test_misspelt_words_are_marked_and_corrected(qtbot, window, make_project):
    window.projects.open_project(
        make_project(docs=(("A", "The harbour was *quiet* and recieve teh wind."),))
    )
    assert underlined(window) == ["recieve", "teh"]
    editor = window.editor
    position = editor.toPlainText().index("recieve") + 2
    cursor = editor.textCursor()
    cursor.setPosition(position)
    menu = editor.context_menu(editor.cursorRect(cursor).center())
    texts = [a.text() for a in menu.actions()]
    assert texts[0] == "receive" and "Add “recieve” to the dictionary" in texts
    menu.actions()[0].trigger()  # the correction replaces the word
    assert editor.toPlainText().startswith("The harbour was *quiet* and receive teh")
    assert underlined(window) == ["teh"]


def test_own_words_are_kept_and_f7_turns_checking_off(qtbot, window, make_project):
    window.projects.open_project(make_project(docs=(("A", "Beyond the glimmerfen lay the sea."),)))
    assert underlined(window) == ["glimmerfen"]
    window.editor.word_added.emit("glimmerfen")
    assert underlined(window) == []
    assert "glimmerfen" in window.spelling.words_path.read_text(encoding="utf-8")
    window.editor.set_text("Beyond the mirefold lay the sea.")
    assert underlined(window) == ["mirefold"]
    window.actions_by_name["spelling"].trigger()  # F7: off
    assert underlined(window) == [] and window.settings.spelling is False


def test_a_missing_dictionary_is_said_once(qtbot, window, monkeypatch):
    from swiftwriter.ui import spelling_control

    messages = []
    monkeypatch.setattr(window.statusBar(), "showMessage", lambda m, *_: messages.append(m))
    real = spelling_control.Speller
    monkeypatch.setattr(spelling_control, "Speller", lambda *a: real("xx"))
    window.spelling.speller = None
    window.spelling._told.clear()
    window.settings.spelling_language = "de"
    window.spelling.apply()
    window.spelling.apply()
    assert messages == ["No spelling dictionary for 'xx': spell checking is off"]
    assert window.editor.highlighter.speller is None


def test_marks_land_on_their_word_after_an_emoji(qtbot, window, make_project):
    window.projects.open_project(make_project(docs=(("A", "🌊🌊 the *sea* and teh wind"),)))
    layout = window.editor.document().findBlockByNumber(0).layout()
    text = window.editor.document().findBlockByNumber(0).text()  # Qt's text: UTF-16 units
    units = text.encode("utf-16-le")

    def marked(check):
        return [
            units[2 * f.start : 2 * (f.start + f.length)].decode("utf-16-le")
            for f in layout.formats()
            if check(f.format)
        ]

    assert marked(lambda f: f.underlineStyle() == WAVY) == ["teh"]
    assert marked(lambda f: f.fontItalic()) == ["*sea*"]


def test_a_sentence_start_is_checked_and_the_projects_names_pass(qtbot, window, make_project):
    """'Teh first boat' was not underlined (capitalised words were all taken for names, issue
    63); a name of the project's own at the start of a sentence still passes."""
    docs = (("A", "Teh first boat came to Aldermouth. Aldermouth slept. Qwertz waited."),)
    window.projects.open_project(
        make_project(docs=docs, notes=(("Cast", "Qwertz: harbour master", True),))
    )
    assert underlined(window) == ["Teh"]
    editor = window.editor
    cursor = editor.textCursor()
    cursor.setPosition(1)
    menu = editor.context_menu(editor.cursorRect(cursor).center())
    assert menu.actions()[0].text() == "The"  # corrections lead its menu, as any misspelling's

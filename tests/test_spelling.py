"""Spell checking without Qt: misspelt words found, names and British spellings left alone,
corrections ranked by frequency, the writer's own words kept, a missing dictionary a message."""

from swiftwriter.spelling import Speller, load_words, save_words


def test_misspelt_words_and_their_corrections():
    speller = Speller("en")
    text = "The harbour's colour was realised; we travelled to the centre, Pender recieve teh"
    assert [text[a:b] for a, b in speller.misspelt(text)] == ["recieve", "teh"]
    assert speller.suggestions("recieve")[0] == "receive"
    assert speller.suggestions("teh")[0] == "the"
    assert speller.suggestions("Teh")[0] == "The"


def test_own_words_and_a_missing_dictionary(tmp_path):
    speller = Speller("en", own_words=["aldermouth"])
    assert speller.misspelt("in aldermouth and glimmerfen") == [(18, 28)]
    speller.add("glimmerfen")
    assert speller.misspelt("in aldermouth and glimmerfen") == []
    path = tmp_path / "words.txt"
    save_words(path, speller.own)
    assert load_words(path) == {"aldermouth", "glimmerfen"}
    off = Speller("xx")
    assert not off.ready and "No spelling dictionary for 'xx'" in off.problem
    assert off.misspelt("anything at al") == []


def test_a_misspelt_first_word_of_a_sentence_is_caught():
    """'Teh first boat' passed: every capitalised word was taken for a name (issue 63). Inside
    a sentence it still is; at a sentence's start only a name the project uses passes."""
    speller = Speller("en")

    def flagged(text):
        return [text[a:b] for a, b in speller.misspelt(text)]

    text = "Teh first boat came in. Aldermouth slept; Tom Pender did not. Recieve it, Mr. Pender."
    assert flagged(text) == ["Teh", "Aldermouth", "Recieve"]
    assert flagged("“Go.” Teh boat… Wehn now? 1. Teh list") == ["Teh", "Wehn", "Teh"]
    assert flagged("J. R. Qwertz and St. Ives, she said, “Qwertz!”") == []  # initials, names
    speller.learn_names("The tide came into Aldermouth.\nTeh end")  # inside a sentence only
    assert flagged(text) == ["Teh", "Recieve"]
    speller.learn_names("Qwertz: the harbour master", every_capital=True)  # a cast list
    assert flagged("Qwertz waited.") == []

"""Words as a writer counts them: scene breaks and lone punctuation are not words."""

from swiftwriter.words import count_words


def test_scene_breaks_and_dashes_are_not_words():
    assert count_words("The sea.\n\n#\n\n* * *\n\nIt rose — and fell.") == 6
    assert count_words("don't stop, half-way") == 3
    assert count_words("") == 0


def test_a_long_run_of_punctuation_is_one_piece_and_no_word():
    # (a backtracking pattern took 3.4 s on 20,000 dashes; this one piece would take hours)
    assert count_words("-" * 200_000 + " word") == 1


def test_the_tally_of_a_streamed_text_is_the_whole_texts_count():
    import random

    from swiftwriter.words import WordTally

    rng = random.Random(5)
    alphabet = ["a", "b", "-", " ", "\n", "—", ".", "7", "  "]
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60)))
        tally, at = WordTally(), 0
        while at < len(text):
            step = rng.randrange(1, 6)
            tally.push(text[at : at + step])
            at += step
            assert tally.total == count_words(text[:at]), text[:at]

"""Words as a writer counts them: scene breaks and lone punctuation are not words."""

from swiftwriter.words import count_words


def test_scene_breaks_and_dashes_are_not_words():
    assert count_words("The sea.\n\n#\n\n* * *\n\nIt rose — and fell.") == 6
    assert count_words("don't stop, half-way") == 3
    assert count_words("") == 0


def test_a_long_run_of_punctuation_is_one_piece_and_no_word():
    # (a backtracking pattern took 3.4 s on 20,000 dashes; this one piece would take hours)
    assert count_words("-" * 200_000 + " word") == 1

"""Words as a writer counts them: scene breaks and lone punctuation are not words."""

from swiftwriter.words import count_words


def test_scene_breaks_and_dashes_are_not_words():
    assert count_words("The sea.\n\n#\n\n* * *\n\nIt rose — and fell.") == 6
    assert count_words("don't stop, half-way") == 3
    assert count_words("") == 0

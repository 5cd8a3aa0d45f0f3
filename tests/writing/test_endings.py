"""Where a take ends: the length asked for, the next sentence end within an allowance, or a
stop sequence; the project's stop sequences; the session and the CLI use them."""

from __future__ import annotations

import pytest
from swiftwriter.errors import UserError
from swiftwriter.store import Project, ProjectError
from swiftwriter.writing.endings import TakeEnding, allowance_for, ends_sentence, parse_stops


def test_sentence_ends_and_allowance():
    for text in ("He left.", 'She said "no."', "Really?!", "End…", "para\n\n", "(done.) "):
        assert ends_sentence(text), text
    for text in ("He left", "Mr", "word,", "a; b"):
        assert not ends_sentence(text), text
    assert allowance_for(20) == 8 and allowance_for(300) == 30 and allowance_for(5000) == 64


def decode(ids):
    return "".join(WORDS[i] for i in ids)


WORDS = {0: " The", 1: " cat", 2: " sat", 3: ".", 4: " THE", 5: " END", 6: "\n", 7: "Chapter 2"}


def test_the_checker_stops_at_a_sentence_end_past_the_target_or_at_a_stop_sequence():
    ending = TakeEnding.keep_writing(3, stops=parse_stops(["THE END", r"re:^Chapter \d+"]))
    stop = ending.checker(decode)
    assert ending.min_new_tokens == 3 and ending.limit == 3 + 8
    assert stop([0, 1, 3])  # " The cat." reaches the length at a period
    assert not stop([0, 3])  # a period before the length does not end the take
    assert not stop([0, 3, 1])  # the length reached mid-sentence: write on
    assert stop([0, 4, 5])  # THE END
    assert stop([0, 6, 7])  # a chapter heading at a line start
    assert TakeEnding(10, finish_sentence=False).checker(decode) is None
    # the engine says "stop_string" for both; the writer is told which it was
    assert ending.reason("stop_string", [0, 1, 3], decode) == "length"
    assert ending.reason("stop_string", [0, 4, 5], decode) == "stop_string"
    assert ending.reason("eos", [0, 4, 5], decode) == "eos"
    with pytest.raises(UserError, match="not a valid expression"):
        parse_stops(["re:(unclosed"])
    assert parse_stops(["", "  ", "x"]) == ("x",)


PIECES = [" w"] * 10 + [".", ".", " -", "\n\n", "!", ","]  # the 16-token model's text


def piece_decode(ids):
    return "".join(PIECES[i] for i in ids)


def first_stop(ending: TakeEnding, ids: list[int]) -> int | None:
    """Ask the checker about each length in order, as the engine does; where it first holds."""
    stop = ending.checker(piece_decode)
    return next((n for n in range(1, len(ids) + 1) if stop(ids[:n])), None)


def test_a_length_in_words_ends_at_the_first_sentence_end_with_the_words_written():
    import random

    from swiftwriter.words import count_words

    rng = random.Random(3)
    for _ in range(300):
        ids = [rng.randrange(16) for _ in range(rng.randrange(1, 120))]
        words, estimate = rng.randrange(1, 40), rng.randrange(1, 60)
        ending = TakeEnding(estimate, words=words)
        want = next(  # the definition, each length decoded whole
            (n for n in range(estimate, len(ids) + 1)
             if ends_sentence(piece_decode(ids[:n])) and count_words(piece_decode(ids[:n])) >= words),
            None,
        )  # fmt: skip
        assert first_stop(ending, ids) == want
    # room for a take that spends half as many tokens again on a word as the writer's text
    assert TakeEnding(40_000, words=30_000).limit == 60_000
    assert TakeEnding(40_000).limit == 40_064


def test_the_project_keeps_its_stop_sequences(tmp_path):
    path = tmp_path / "P.swiftwriter"
    with Project.create(path, title="P") as p:
        assert p.stop_sequences == []
        p.set_stop_sequences(["THE END", "re:^Chapter \\d+"])
    with Project.open(path) as p:
        assert p.stop_sequences == ["THE END", "re:^Chapter \\d+"]
        with pytest.raises(ProjectError, match="one line"):
            p.set_stop_sequences(["two\nlines"])


def test_the_session_ends_at_the_projects_stop_sequence_and_records_the_ending(
    tmp_path, tiny_llama
):
    from swiftwriter.engine import SamplingSettings
    from swiftwriter.writing.session import DocumentSession

    from tests.writing.test_session import Latin1Tokenizer, random_text

    path = tmp_path / "P.swiftwriter"
    with Project.create(path, title="P") as p:
        doc = p.add_document("C", random_text(3, 40))
        common = dict(model=tiny_llama, tokenizer=Latin1Tokenizer(), model_id="t",
                      sampling=SamplingSettings(greedy=True, penalty=1.2),
                      flush_interval=0, prompt_text=doc.text)  # fmt: skip
        free = DocumentSession(p, doc.id, ending=TakeEnding.exact(80), **common).run()
        stop = free.text[30:33]
        first = free.text.find(stop) + len(stop)
        p.set_stop_sequences([stop])
        cut = DocumentSession(p, doc.id, ending=TakeEnding.exact(80), **common).run()
        assert cut.text == free.text[:first]
        assert cut.stats["stop_reason"] == "stop_string"
        assert cut.generation.settings["ending"]["stops"] == [stop]
        ending = TakeEnding.keep_writing(50, finish_sentence=False)
        full = DocumentSession(p, doc.id, ending=ending, **common)
        assert full.ending.stops == (stop,) and full.ending.limit == 50

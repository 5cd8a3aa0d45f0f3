"""Selection tools (alternatives.py): several alternatives of a passage written together,
each the model's own text for its seed; bad requests refused in one line."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from swiftwriter.bench.alternatives import bench_alternatives, plain_tokens
from swiftwriter.engine import SamplingSettings
from swiftwriter.errors import UserError
from swiftwriter.writing.alternatives import (
    alternative_sampling,
    selection_prompt,
    tidy,
    token_budget,
    write_alternatives,
)

from tests.writing.test_session import Latin1Tokenizer

PASSAGE = "The ferry left at dawn. Mara watched the harbour lights go out one by one."


@pytest.fixture
def loaded(tiny_llama):
    return SimpleNamespace(model=tiny_llama, tokenizer=Latin1Tokenizer(), drafter=None)


@pytest.mark.usefixtures("one_thread")
def test_alternatives_are_each_the_models_text_for_their_seed(loaded):
    pieces: dict[int, list[str]] = {0: [], 1: [], 2: []}
    result = write_alternatives(
        loaded, "describe", PASSAGE, before="Chapter one.", seeds=[7, 8, 9],
        max_new_tokens=30, min_new_tokens=30, on_text=lambda i, piece: pieces[i].append(piece),
    )  # fmt: skip
    assert [alt.seed for alt in result.alternatives] == [7, 8, 9]
    prompt = selection_prompt(loaded.tokenizer, "describe", PASSAGE, "Chapter one.")
    sampling = alternative_sampling(None)
    for i, alt in enumerate(result.alternatives):
        assert alt.text == tidy("".join(pieces[i]))
        plain = plain_tokens(loaded, prompt, len(alt.token_ids), sampling, alt.seed)
        assert alt.token_ids == plain[: len(alt.token_ids)]
    assert len({tuple(alt.token_ids) for alt in result.alternatives}) == 3, "seeds differ"
    assert result.status == "finished" and len(result.stats) == 3


@pytest.mark.usefixtures("one_thread")
def test_the_bench_checks_each_alternative_against_plain_decoding(loaded):
    report = bench_alternatives(loaded, "rewrite", PASSAGE, count=2, tokens=20, rounds=1)
    assert report["same"] == {1: True, 2: True}
    assert report["one_s"] > 0 and report["many_s"] > 0 and report["ratio"] > 0


def test_bad_requests_are_refused_in_one_line(loaded):
    tok = loaded.tokenizer
    with pytest.raises(UserError, match="Select a passage"):
        selection_prompt(tok, "rewrite", "   ")
    with pytest.raises(UserError, match="at most"):
        selection_prompt(tok, "rewrite", "x" * 7000)
    with pytest.raises(UserError, match="No selection tool"):
        selection_prompt(tok, "poeticise", PASSAGE)
    with pytest.raises(UserError, match="instruction"):
        selection_prompt(tok, "custom", PASSAGE)
    for count in (0, 9):
        with pytest.raises(UserError, match="1 to 8"):
            write_alternatives(loaded, "rewrite", PASSAGE, count=count)


def test_the_tools_ask_for_what_they_promise(loaded):
    tok = loaded.tokenizer
    assert "tenser" in tok.decode(selection_prompt(tok, "custom", PASSAGE, instruction="tenser"))
    assert token_budget(tok, "shorten", PASSAGE) < token_budget(tok, "expand", PASSAGE)
    # a greedy mode would write one text three times
    assert not alternative_sampling(SamplingSettings(greedy=True)).greedy
    assert tidy('  "A quoted passage."  ') == "A quoted passage."
    assert tidy('"One" and "two"') == '"One" and "two"'
    # out of tokens: ended at the last full sentence, unless that loses most of it
    assert tidy("She ran. He said \u201cstop.\u201d Then the", cut=True) == (
        "She ran. He said \u201cstop.\u201d"
    )
    assert tidy("Short. Then a long unfinished clause goes on and on", cut=True).endswith("on")

"""The script fence: the tokens that write (or begin) letters in scripts the writer's text does
not use, judged by their bytes, whole letters and a letter's first bytes alike; what the writer
uses (Latin, accents, dashes and quotes, its own scripts) is never fenced."""

from __future__ import annotations

import random

import pytest
from swiftwriter.engine.decoding.scripts import (
    _byte_level_decoder,
    foreign_tokens,
    is_foreign,
    is_lettered,
    script,
    token_bytes,
    writers_scripts,
    writes_foreign,
)

ENGLISH = "Claire did not look up from the sink. \u201cNot now,\u201d she said \u2014 twice."
STAND_IN = {byte: char for char, byte in _byte_level_decoder().items()}


def byte_level(data: bytes) -> str:
    """A token's piece as a byte-level (GPT-2 style) vocabulary spells it."""
    return "".join(STAND_IN[b] for b in data)


def test_byte_level_pieces_map_back_to_their_bytes():
    words = ["Ġthe", "Ġsea", "Ġcafé", "—", "Ġעם", "ＶＨ", "カ", "\u00e9t"]
    pieces = [byte_level(w.replace("Ġ", " ").encode()) for w in words]
    assert pieces[:2] == ["Ġthe", "Ġsea"]  # GPT-2's stand-in for a space
    assert token_bytes(pieces) == [w.replace("Ġ", " ").encode() for w in words]
    assert len(STAND_IN) == 256 and len(set(STAND_IN.values())) == 256


def test_sentencepiece_pieces_read_their_byte_fallback_and_spaces():
    assert token_bytes(["▁the", "<0xD7>", "<0x93>", "é", "<s>"]) == [
        b" the",
        b"\xd7",
        b"\x93",
        "é".encode(),
        b"<s>",
    ]


def test_a_japanese_writer_keeps_the_ideographs_marks_and_malformed_bytes_pass():
    japanese = writers_scripts("日本語で書いた。")
    assert "CJK" in japanese and not writes_foreign("時々".encode(), japanese)
    for malformed in (b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"):
        assert writes_foreign(malformed, writers_scripts(ENGLISH)) is False  # nothing to judge


def test_the_writers_scripts():
    assert writers_scripts(ENGLISH) == {"LATIN"}
    assert writers_scripts("Он сказал: «Да». OK.") == {"LATIN", "CYRILLIC"}
    assert writers_scripts("— 1, 2, 3 —") == frozenset()  # no letters: nothing to go by
    assert "FULLWIDTH" in writers_scripts("彼は言った！")


@pytest.mark.parametrize(
    ("text", "foreign"),
    [
        ("the", False), (" café", False), ("\u2014", False), ("\u201c", False), ("ʼ", False),
        ("µ", False), ("ª", False), ("e\u0301", False), ("𝑥", False), ("ℓ", False),
        ("½", False), ("™", False), ("🙂", False), ("ı", False), ("ə", False),
        ("ע", True), (" عم", True), ("カ", True), ("中", True), ("Ｖ", True), ("１", True),
        ("п", True), (" μm", True), ("ि", True), ("\u05bc", True),  # a vowel sign, a point
        ("\u2764\ufe0f", False), ("\ufe0f", False),  # ❤️: the emoji's variation selector
        ("々", True),  # an ideograph's mark: foreign to an English text (below: not to Japanese)
    ],
)  # fmt: skip
def test_whole_letters_are_judged_by_their_script(text, foreign):
    assert writes_foreign(text.encode(), writers_scripts(ENGLISH)) is foreign


@pytest.mark.parametrize(
    ("data", "foreign"),
    [
        (b"\xd7", True),  # only Hebrew begins so
        (b" \xd8", True),  # Arabic
        (b"\xe3", True),  # CJK symbols, kana, ideographs
        (b"\xe3\x82", True),  # katakana
        (b"\xef\xbc", True),  # full-width forms
        (b"\xce", True),  # Greek
        (b"\xe2", False),  # the em dash and the quotes begin so
        (b"\xe2\x80", False),
        (b"\xc3", False),  # é
        (b"\xcc", False),  # combining accents
        (b"\xe1", False),  # Latin Extended Additional (ṣ, ḥ) among others
        (b"\xf0\x9f", False),  # emoji
        (b"\x93", False),  # a letter's end: begun by the token before, nothing to judge
        (b"\x93\x94 the", False),
        (b"the \xd7", True),  # a whole word, then Hebrew's first byte
        (b"\xff", False),  # no UTF-8
    ],
)
def test_a_letters_first_bytes_are_judged_by_every_letter_they_can_begin(data, foreign):
    assert writes_foreign(data, writers_scripts(ENGLISH)) is foreign


def _every_completion(start: bytes) -> list[str]:
    lead = start[0]
    need = (2 if lead < 0xE0 else 3 if lead < 0xF0 else 4) - len(start)
    tails = [b""]
    for _ in range(need):
        tails = [t + bytes([b]) for t in tails for b in range(0x80, 0xC0)]
    out = []
    for tail in tails:
        try:
            out.append((start + tail).decode("utf-8"))
        except UnicodeDecodeError:
            continue
    return out


def test_a_fenced_start_never_begins_a_letter_the_writer_may_use():
    """Against the definition: every 2- and 3-byte lead, 200 random 3-byte starts and 22 4-byte
    ones. A fenced start begins no letter or mark outside the fence; an open start begins at
    least one (or nothing foreign at all)."""
    own = writers_scripts(ENGLISH)
    rng = random.Random(5)
    starts = [bytes([lead]) for lead in range(0xC2, 0xF0)]  # every 2- and 3-byte lead alone
    starts += [bytes([rng.randrange(0xE0, 0xF0), rng.randrange(0x80, 0xC0)]) for _ in range(200)]
    starts += [bytes([0xF0, 0x9F]), bytes([0xF4])]  # emoji; the last plane, cut at U+10FFFF
    starts += [bytes([rng.randrange(0xF0, 0xF4), rng.randrange(0x80, 0xC0)]) for _ in range(20)]
    fenced = 0
    for start in starts:
        chars = _every_completion(start)
        usable = [c for c in chars if is_lettered(c) and not is_foreign(c, own)]
        if writes_foreign(start, own):
            fenced += 1
            assert not usable, (start, usable[:3])
            assert any(is_foreign(c, own) for c in chars)
        else:
            assert usable or not any(is_foreign(c, own) for c in chars), start
    assert 20 < fenced < len(starts)  # the test sees both sides


def test_foreign_tokens_keep_the_writers_scripts_and_the_end_of_text():
    words = ["<|endoftext|>", "Ġthe", "Ġcafé", "—", "Ġעם", "\u05d3", "ＶＨ", "Ġон", "Ġsaid"]
    pieces = [w if w.startswith("<") else byte_level(w.replace("Ġ", " ").encode()) for w in words]
    pieces.append(byte_level(b"\xd7"))  # Hebrew's first byte, alone
    assert foreign_tokens(pieces, writers_scripts(ENGLISH), keep=[0]) == (4, 5, 6, 7, 9)
    russian = ENGLISH + " Он сказал: «Да»."
    assert foreign_tokens(pieces, writers_scripts(russian), keep=[0]) == (4, 5, 6, 9)
    assert foreign_tokens(pieces, writers_scripts(""), keep=[0]) == ()
    assert script("ע") == "HEBREW"


def test_on_the_default_model_the_writers_text_is_never_fenced_and_soup_is(default_model):
    """The real vocabulary: every held-out prompt's own tokens stay open under its own fence,
    and letter soup of the kinds the app's long takes ended in cannot start (each of its
    written forms holds a fenced token)."""
    from swiftwriter.bench.suite import load_suite

    tokenizer = default_model.tokenizer
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    for prompt in load_suite("held-out"):
        fenced = set(foreign_tokens(pieces, writers_scripts(prompt.text)))
        assert not fenced & set(tokenizer(prompt.text)["input_ids"]), prompt.name
        assert 100 < len(fenced) < 0.05 * len(pieces)
    fenced = set(foreign_tokens(pieces, writers_scripts(ENGLISH)))
    for soup in ["עמעצם עם", "ＶＨＩＨ", "カタカナの", "العربية", "中文字", "Привет"]:
        ids = tokenizer(soup, add_special_tokens=False)["input_ids"]
        assert fenced & set(ids), soup

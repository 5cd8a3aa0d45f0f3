"""Streaming never shows half a character: with a tokenizer that splits UTF-8 characters
across tokens, no piece holds U+FFFD and the pieces join to the text; the final flush gives
what the decoder held back."""

from __future__ import annotations

import random

from swiftwriter.engine.decoding.textgen import IncrementalDecoder

TEXT = "Café crème, naïve — 你好 🙂 déjà vu. “Quoted” ☕ end"


class ByteTokenizer:
    """One token per UTF-8 byte: every accented letter, CJK character and emoji is split."""

    def decode(self, ids, skip_special_tokens=True):
        return bytes(ids).decode("utf-8", errors="replace")


def test_pieces_never_hold_half_a_character():
    ids = list(TEXT.encode("utf-8"))
    rng = random.Random(3)
    for _ in range(20):
        decoder = IncrementalDecoder(ByteTokenizer())
        pieces, at = [], 0
        while at < len(ids):
            step = rng.randint(1, 3)
            pieces.append(decoder.push(ids[at : at + step]))
            at += step
        assert all("\ufffd" not in p for p in pieces), pieces
        assert "".join(pieces) == TEXT


def test_a_split_character_waits_for_its_last_byte():
    decoder = IncrementalDecoder(ByteTokenizer())
    e_acute = list("é".encode())
    assert decoder.push(list(b"Caf")) == "Caf"
    assert decoder.push(e_acute[:1]) == ""  # half of é: nothing yet
    assert decoder.push(e_acute[1:]) == "é"

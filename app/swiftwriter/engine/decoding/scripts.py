"""Scripts: which writing system a letter belongs to, and the vocabulary's tokens that only write
letters in scripts the writer's text does not use.

A small model that writes for long can slide into letter soup in a script the story never used
(the app's 50,000-word takes ended in Hebrew, Arabic, katakana and full-width forms). The take's
guards end it then; a fence stops it at the source: the tokens that can only write a foreign
letter go on SamplingSettings.banned_tokens, which the one logits pipeline applies to plain
decoding and to every verified node alike, so speculation stays exact.

A token is judged by its bytes. Byte-level vocabularies (GPT-2's, Llama 3's, Qwen's) split a rare
letter into pieces of its UTF-8 bytes, and SentencePiece ones fall back to <0xNN> bytes, so a
token that ends in a letter's first bytes is judged by every character those bytes can begin: it
is foreign when some are foreign letters and none is a letter or mark the writer may use (0xD7
can only begin Hebrew; a lone 0xE2 begins dashes and quotes, which do not count either way, but
also ⁱ and ℓ, and stays). Bytes that continue a letter begun by the token before say nothing
and are passed over. Pure functions on
token texts, no model."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

# Letters named for what they do, not for a script: every writer may use them (ª, µ, ʼ, 𝑥),
# like the letterlike symbols (ℓ) and the combining marks of every script (an accent).
NEUTRAL = frozenset(
    {"MODIFIER", "FEMININE", "MASCULINE", "MICRO", "SUPERSCRIPT", "SUBSCRIPT", "MATHEMATICAL"}
)
_NEUTRAL_BLOCKS = (
    range(0x0300, 0x0370), range(0x1AB0, 0x1B00), range(0x1DC0, 0x1E00),
    range(0x20D0, 0x2150), range(0xFE20, 0xFE30),
    range(0xFE00, 0xFE10), range(0xE0100, 0xE01F0),  # variation selectors (the emoji's ❤️)
)  # fmt: skip
_ALIASES = {"IDEOGRAPHIC": "CJK"}  # 々 and 〆 belong with the ideographs
ALWAYS_OWN = frozenset({"LATIN"})  # a text in any script names people and things in Latin letters
_WIDTH_FORMS = ("FULLWIDTH", "HALFWIDTH")  # letters, digits and marks alike
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def script(char: str) -> str:
    """A letter's script, by the first word of its Unicode name (LATIN, HEBREW, CJK, ...)."""
    first = unicodedata.name(char, "?").split(" ")[0]
    return _ALIASES.get(first, first)


def scripts_of(text: str, least: float = 0.0) -> set[str]:
    """The scripts that hold at least `least` of the text's letters (0: any letter at all)."""
    counts = Counter(script(c) for c in text if c.isalpha())
    total = sum(counts.values())
    return {name for name, n in counts.items() if n / total >= least}


def is_lettered(char: str) -> bool:
    """A letter, or a mark written on one (a vowel sign, a point, an accent)."""
    return char.isalpha() or unicodedata.category(char).startswith("M")


def is_foreign(char: str, own: frozenset[str]) -> bool:
    """Whether `char` is a letter or mark (or a full- or half-width form) of a script outside
    `own`."""
    if char.isascii() or any(ord(char) in block for block in _NEUTRAL_BLOCKS):
        return False
    name = script(char)
    if name in _WIDTH_FORMS:
        return name not in own
    return is_lettered(char) and name not in NEUTRAL and name not in own


def _utf8_length(lead: int) -> int:
    """How many bytes a UTF-8 sequence with this lead byte has."""
    return 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


@functools.lru_cache(maxsize=4096)
def _begun_foreign(start: bytes, own: frozenset[str]) -> bool:
    """Whether the incomplete UTF-8 sequence `start` can only begin characters that are safe to
    ban: some are foreign, and none is a letter of `own` or a neutral one."""
    lead = start[0]
    length = _utf8_length(lead)
    bits = lead & (0x7F >> length)  # the lead byte's own bits: 110xxxxx, 1110xxxx, 11110xxx
    for byte in start[1:]:
        bits = (bits << 6) | (byte & 0x3F)
    free = 6 * (length - len(start))
    low, high = bits << free, ((bits + 1) << free) - 1
    low = max(low, (0x80, 0x800, 0x10000)[length - 2])
    any_foreign = False
    for code in range(low, min(high, 0x10FFFF) + 1):
        char = chr(code)
        if unicodedata.category(char) in ("Cn", "Cs", "Co"):  # unassigned, surrogate, private
            continue
        if is_foreign(char, own):
            any_foreign = True
        elif is_lettered(char) or script(char) in own:  # a letter or mark the writer may use
            return False
    return any_foreign


def writes_foreign(data: bytes, own: frozenset[str]) -> bool:
    """Whether a token of these bytes writes (or begins) a letter of a script outside `own`."""
    i = 0
    while i < len(data) and 0x80 <= data[i] < 0xC0:  # the end of a letter begun before
        i += 1
    while i < len(data):
        lead = data[i]
        if lead < 0x80:
            i += 1
            continue
        if lead < 0xC2 or lead > 0xF4:  # no UTF-8 lead byte: nothing to judge
            return False
        length = _utf8_length(lead)
        part = data[i : i + length]
        if any(not 0x80 <= b < 0xC0 for b in part[1:]):  # not UTF-8: nothing to judge
            return False
        if len(part) < length:  # the token ends in a letter's first bytes
            return _begun_foreign(part, own)
        try:
            char = part.decode("utf-8")
        except UnicodeDecodeError:  # overlong, a surrogate, past U+10FFFF: nothing to judge
            return False
        if is_foreign(char, own):
            return True
        i += length
    return False


@functools.lru_cache(maxsize=1)
def _byte_level_decoder() -> dict[str, int]:
    """GPT-2's map from the printable stand-ins of byte-level vocabularies back to bytes."""
    visible = [*range(33, 127), *range(161, 173), *range(174, 256)]
    stand_ins = {}
    extra = 0
    for b in range(256):
        if b in visible:
            stand_ins[chr(b)] = b
        else:
            stand_ins[chr(256 + extra)] = b
            extra += 1
    return stand_ins


def token_bytes(pieces: Sequence[str]) -> list[bytes]:
    """Each token's bytes from its piece (a tokenizer's `convert_ids_to_tokens`): byte-level
    stand-ins mapped back when the vocabulary is byte-level, SentencePiece's <0xNN> and its ▁
    (a space) otherwise."""
    decoder = _byte_level_decoder()
    plain = [p for p in pieces if p and not (p.startswith("<") and p.endswith(">"))]
    spaced = sum(1 for p in plain if p.startswith("Ġ"))  # GPT-2's stand-in for a space
    mapped = sum(1 for p in plain if all(c in decoder for c in p))
    byte_level = spaced > 0 and mapped >= 0.99 * len(plain)
    out = []
    for piece in pieces:
        single = _BYTE_PIECE.fullmatch(piece or "")
        if single:
            out.append(bytes([int(single.group(1), 16)]))
        elif byte_level and piece and all(c in decoder for c in piece):
            out.append(bytes(decoder[c] for c in piece))
        else:
            out.append((piece or "").replace("▁", " ").encode("utf-8"))
    return out


def writers_scripts(text: str) -> frozenset[str]:
    """The scripts the writer's text uses: those of any of its letters, Latin, and the full- or
    half-width forms if it uses any. Empty for a text without letters: nothing to go by."""
    if not any(c.isalpha() for c in text):
        return frozenset()
    widths = {script(c) for c in text if not c.isascii()} & set(_WIDTH_FORMS)
    return frozenset(scripts_of(text)) | ALWAYS_OWN | widths


def foreign_tokens(
    pieces: Sequence[str], own: frozenset[str], keep: Iterable[int] = ()
) -> tuple[int, ...]:
    """The ids of the tokens that write (or begin) a letter of a script outside `own`
    (writers_scripts; empty: nothing is fenced); `keep`, the end of text, is never banned."""
    if not own:
        return ()
    kept = set(keep)
    return tuple(
        i for i, data in enumerate(token_bytes(pieces))
        if i not in kept and data and writes_foreign(data, own)
    )  # fmt: skip

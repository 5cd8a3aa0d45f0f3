"""Chatter: how often a take leaves the story for an assistant's voice. An instruct model that
writes for long drifts into answering a user (questions and answers, "I hope this helps",
"Let me know", headings and lists); Distinct-n does not see it, so the long-run benchmark
counts it per segment.

A line (a paragraph of the take) is chatter when its narration, quoted speech set aside, holds:
- `assistant`: an assistant's phrase ("I hope this helps", "Let me know", "As an AI", "feel
  free to", a "Here is ...:" lead-in, "Certainly!" or "Sure!" opening the line);
- `qa`: a question-and-answer or chat label opening the line ("Q:", "Answer:", "User:"), or a
  chat template's marker anywhere ("<|im_start|>": the model began a new turn);
- `reader`: the reader addressed: a question in the second person ("What do you think will
  happen next?") or "dear reader";
- `markdown`: a heading, a list item, a quote block, a rule, a code fence, a table row or a
  line in bold alone.
Dialogue is the story's own ("Let me know when you're back," she said), so the phrases are
looked for outside quotation marks. The rate is the share of the text's words in chatter lines
(a long answer weighs more than a stray heading). Pure functions on text, no model.

`banned_tokens` is a counter that keeps speculation exact: the vocabulary's tokens that only
chatter writes (a heading's "#", bold's "**", a code fence, a chat template's turn markers), for
SamplingSettings.banned_tokens, which the one logits pipeline applies to plain decoding and to
every verified node alike."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

KINDS = ("assistant", "qa", "reader", "markdown")

_ASSISTANT = re.compile(
    r"\b(i hope (this|that|you|it) (helps?|was helpful|gives?|enjoy|find|meets?)"
    r"|hope (this|that) helps|let me know|feel free to|happy to help|i'd be happy to"
    r"|i would be happy to|as an ai\b|as a language model|i'm an ai\b|i am an ai\b"
    r"|if you have any (other |more |further )?questions|do you have any (other |more )?questions"
    r"|is there anything else|would you like me to|i can help you|i apologi[sz]e"
    r"|thank you for (reading|your (question|request|patience))|happy writing)",
    re.IGNORECASE,
)
_OPENER = re.compile(
    r"^\W*(certainly|sure|of course|absolutely|great question|good question)\s*[!.,:]"
    r"|^\W*(here is|here's|here are)\b[^.!?]*:\s*$",
    re.IGNORECASE,
)
_QA = re.compile(
    r"^\W*(q|a|question|answer|user|assistant|human|ai|system|response|reply)\s*\d*\s*:",
    re.IGNORECASE,
)
_CHAT_MARK = re.compile(r"<\|[a-z_]+\|>")
_YOU = re.compile(r"\b(you|your|you're|yours|yourself|you've|you'll|you'd)\b", re.IGNORECASE)
_DEAR_READER = re.compile(r"\b(dear|my) readers?\b", re.IGNORECASE)
_MARKDOWN = re.compile(
    r"^\s*(#{1,6}\s|[-*+•]\s+\S|\d{1,3}[.)]\s+\S|>\s|```|(-{3,}|\*{3,}|_{3,})\s*$"
    r"|\*\*[^*]+\*\*[:.]?\s*$|__[^_]+__[:.]?\s*$|\|.*\|\s*$)"
)
_QUOTED = re.compile(r'"[^"]*("|$)|“[^”]*(”|$)|‘[^’]*(’|$)|`.*?(\'(?!\w)|$)')  # `old style'
_WORD = re.compile(r"\w+(?:'\w+)?")


def narration(line: str) -> str:
    """The line with its quoted speech taken out (an unclosed quotation runs to the line's end)."""
    return _QUOTED.sub(" ", line)


def classify(line: str) -> set[str]:
    """The kinds of chatter one line holds (empty: the story's own line)."""
    kinds = set()
    if _MARKDOWN.match(line):
        kinds.add("markdown")
    if _QA.match(line) or _CHAT_MARK.search(line):
        kinds.add("qa")
    told = narration(line).strip()
    if _ASSISTANT.search(told) or _OPENER.search(told):
        kinds.add("assistant")
    if (told.endswith("?") and _YOU.search(told)) or _DEAR_READER.search(told):
        kinds.add("reader")
    return kinds


def lines(text: str) -> list[str]:
    """The text's non-empty lines."""
    return [line for line in text.splitlines() if line.strip()]


def measure(text: str) -> dict:
    """Chatter in one text: its lines and words, those in chatter lines, the rate (chatter
    words / words; None for a text without words) and chatter lines by kind."""
    by_kind = dict.fromkeys(KINDS, 0)
    n_lines = n_words = chatter_lines = chatter_words = 0
    for line in lines(text):
        words = len(_WORD.findall(line))
        kinds = classify(line)
        n_lines += 1
        n_words += words
        if kinds:
            chatter_lines += 1
            chatter_words += words
            for kind in kinds:
                by_kind[kind] += 1
    return {
        "lines": n_lines,
        "words": n_words,
        "chatter_lines": chatter_lines,
        "chatter_words": chatter_words,
        "rate": round(chatter_words / n_words, 4) if n_words else None,
        "by_kind": by_kind,
    }


def examples(text: str, limit: int = 5) -> list[str]:
    """The first chatter lines of a text, for a report."""
    found = (line.strip() for line in lines(text) if classify(line))
    return [line for line, _ in zip(found, range(limit), strict=False)]


def by_segment(texts: Iterable[str]) -> list[dict]:
    """`measure` of each segment's text."""
    return [measure(text) for text in texts]


_MARKS = ("#", "**", "```", "<|")


def banned_tokens(pieces: Sequence[str], keep: Iterable[int] = ()) -> tuple[int, ...]:
    """The ids (indexes into `pieces`, each token's text: a tokenizer's
    `convert_ids_to_tokens`) holding a mark no story needs; `keep` (the end of text) is never
    banned."""
    kept = set(keep)
    return tuple(
        i for i, piece in enumerate(pieces)
        if i not in kept and piece and any(mark in piece for mark in _MARKS)
    )  # fmt: skip

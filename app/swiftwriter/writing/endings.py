"""Where a take ends: at the length the writer asked for (end-of-text forbidden until then
when they want the whole length), at the next sentence or paragraph end after it (within a
small allowance, so a take never stops mid-word), or early at one of the project's stop
sequences. Works on text; the engine applies it through `stop_on_text` and `min_new_tokens`,
the same for plain and speculative decoding."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from swiftwriter.errors import UserError
from swiftwriter.words import count_words

TAIL_TOKENS = 48  # the text checked after each token: enough for any stop sequence
# A sentence end (closing quotes and brackets allowed) or a blank line, at the very end.
_SENTENCE_END = re.compile(r"(?:[.!?\u2026][\"'\u201d\u2019\u00bb)\]]*|\n[ \t]*\n)[ \t]*$")
REGEX_PREFIX = "re:"  # a stop sequence written `re:^Chapter \d+` is a regular expression


def allowance_for(target: int) -> int:
    """Extra tokens a take may run past its length to reach a sentence end."""
    return max(8, min(64, target // 10))


def parse_stops(lines: Sequence[str]) -> tuple[str, ...]:
    """Stop sequences as the writer typed them (one per line), checked: blank ones dropped,
    a bad regular expression refused with its error."""
    out = []
    for raw in lines:
        line = raw.strip("\r\n")
        if not line.strip():
            continue
        if line.startswith(REGEX_PREFIX):
            try:
                re.compile(line[len(REGEX_PREFIX) :], re.MULTILINE)
            except re.error as exc:
                raise UserError(
                    f"The stop pattern {line!r} is not a valid expression: {exc}"
                ) from None
        out.append(line)
    return tuple(out)


@dataclass(frozen=True)
class TakeEnding:
    """A take's length and where it may stop. `target` is the length asked for in tokens: the
    one name of the length from the request (words become tokens there) to the engine."""

    target: int  # tokens asked for (with `words`: the estimate from the writer's own text)
    min_new_tokens: int = 0  # end-of-text forbidden before this many (the target: keep writing)
    finish_sentence: bool = True  # run on (a little) to a sentence or paragraph end
    stops: tuple[str, ...] = ()
    words: int = 0  # a length asked in words: the take ends at a sentence end once written

    @classmethod
    def keep_writing(cls, target: int, **kwargs) -> TakeEnding:
        """The whole length: end-of-text is not allowed before the target."""
        return cls(target, min_new_tokens=target, **kwargs)

    @classmethod
    def exact(cls, target: int, **kwargs) -> TakeEnding:
        """Exactly `target` tokens, or fewer at end-of-text (scripts, benchmarks)."""
        return cls(target, finish_sentence=False, **kwargs)

    @property
    def limit(self) -> int:
        """Not another length: the most tokens the take may write (the engine's bound), the
        target plus the allowance to reach a sentence end; with a length in words, room for
        a take that spends half as many tokens again on a word as the writer's text did."""
        extra = allowance_for(self.target) if self.finish_sentence else 0
        if self.words:
            extra = max(extra, self.target // 2)
        return self.target + extra

    def checker(self, decode: Callable[[list[int]], str]) -> Callable[[list[int]], bool] | None:
        """`stop_on_text` for the engine: True once a stop sequence has been written, or past
        the target at a sentence end; None when nothing but the length ends the take."""
        wrote_stop = self.stop_matcher()
        if not self.stops and not self.finish_sentence and not self.words:
            return None
        long_enough = self._words_written(decode) if self.words else (lambda ids: True)

        def stop(ids: list[int]) -> bool:
            tail = decode(list(ids[-TAIL_TOKENS:]))
            if wrote_stop(tail):
                return True
            if len(ids) < self.target or not (self.words or self.finish_sentence):
                return False
            return ends_sentence(tail) and long_enough(ids)

        return stop

    def _words_written(self, decode) -> Callable[[list[int]], bool]:
        """Whether a take's ids hold the words asked for. Counting decodes the whole take, so
        it is done only when it could be true: a take short of n words needs at least n more
        tokens (a token starts at most one word), and no look comes before them. The engine
        asks about each length of the take once and in order, in plain decoding and in
        speculation alike, so both stop at the same token."""
        next_look = [0]

        def enough(ids: list[int]) -> bool:
            if len(ids) < next_look[0]:
                return False
            short = self.words - count_words(decode(list(ids)))
            if short <= 0:
                return True
            next_look[0] = len(ids) + short
            return False

        return enough

    def stop_matcher(self) -> Callable[[str], bool]:
        """Whether a text's tail holds one of the writer's stop sequences (plain or regex)."""
        plain = [s for s in self.stops if not s.startswith(REGEX_PREFIX)]
        patterns = [
            re.compile(s[len(REGEX_PREFIX) :], re.MULTILINE)
            for s in self.stops
            if s.startswith(REGEX_PREFIX)
        ]
        return lambda tail: any(s in tail for s in plain) or any(p.search(tail) for p in patterns)

    def reason(self, engine_reason: str, ids: list[int], decode) -> str:
        """The take's stop reason as the writer would name it: the engine says "stop_string"
        for any text stop, but a sentence end past the length is the length reached."""
        if engine_reason != "stop_string":
            return engine_reason
        return "stop_string" if self.stop_matcher()(decode(list(ids[-TAIL_TOKENS:]))) else "length"


def ends_sentence(text: str) -> bool:
    return bool(_SENTENCE_END.search(text[-200:]))

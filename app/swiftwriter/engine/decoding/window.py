"""The context-limit policy: which tokens the model sees once a run outgrows its context.

The generator keeps the whole text (`committed`: prompt + output) for the penalty window and the
candidate sources; the model sees `head + committed[tail_start:]`, where `head` is empty until
the first slide. With the "slide" policy the view is rebuilt whenever it fills the context:
head = the prompt's first `sink` tokens (attention sinks) + the pinned tokens, then the most
recent text up to `keep` of the context (the run moves its cache there by a cache edit, or
re-reads the window: run.py). Slides happen only when the view is exactly full (a
step never produces more tokens than the room left), so where they happen depends on the text
alone, never on how the tokens were drafted: speculative and plain decoding slide at the same
token and write the same output."""

from __future__ import annotations

from collections.abc import Sequence

from swiftwriter.engine.decoding.settings import ContextSettings
from swiftwriter.errors import UserError


class ContextWindow:
    """Where the model's view of the text starts, and when it must slide."""

    def __init__(
        self,
        max_context: int | None,
        settings: ContextSettings,
        prompt: Sequence[int],
        pinned: Sequence[int] = (),
    ):
        self.max_context = max_context
        self.settings = settings
        pinned = [int(t) for t in pinned]
        sink = min(settings.sink, len(prompt))
        if pinned and list(prompt[: len(pinned)]) == pinned:
            # The prompt opens with the pinned tokens (notes first): keep them once.
            self.slide_head = list(prompt[: max(sink, len(pinned))])
            self.kept_prefix = len(self.slide_head)  # the prompt's opening ids a slide keeps
        else:
            self.slide_head = list(prompt[:sink]) + pinned
            self.kept_prefix = sink
        self.head: list[int] = []  # empty until the first slide
        self.tail_start = 0
        self.slides = 0
        if settings.policy == "slide" and max_context is not None:
            if len(self.slide_head) > max_context // 2:
                raise UserError(
                    f"The sink and pinned tokens ({len(self.slide_head)}) take more than half of "
                    f"the model's context ({max_context}): pin fewer notes"
                )
            self.keep_tokens = max(len(self.slide_head) + 1, int(max_context * settings.keep))
        else:
            self.keep_tokens = max_context

    @property
    def sliding(self) -> bool:
        return self.settings.policy == "slide" and self.max_context is not None

    def length(self, committed: Sequence[int]) -> int:
        return len(self.head) + len(committed) - self.tail_start

    def room(self, committed: Sequence[int]) -> int:
        """Tokens the view may still grow by before the context is full."""
        if self.max_context is None:
            return 1 << 30
        return self.max_context - self.length(committed)

    def needs_slide(self, committed: Sequence[int]) -> bool:
        return self.sliding and self.room(committed) < 1

    def visible(self, committed: Sequence[int]) -> list[int]:
        return self.head + list(committed[self.tail_start :])

    def shift_span(self, committed: Sequence[int]) -> tuple[int, int] | None:
        """Before a slide: (head slots kept, slots dropped after them) for a cache that holds
        the view but its last token, or None when its first slots do not hold the head yet
        (pinned tokens that do not open the prompt: the first slide re-reads the window)."""
        h = len(self.slide_head)
        unslid = not self.head and not self.tail_start  # the cache holds the text from its start
        if self.head != self.slide_head and not (unslid and list(committed[:h]) == self.slide_head):
            return None
        tail = self.keep_tokens - h
        start = len(self.head) + (len(committed) - tail) - self.tail_start  # the kept tail's slot
        return h, start - h

    def slid_out(self) -> list[int] | None:
        """[start, end) of the text the view has left behind (between the kept head and its
        text), in prompt + output; None before the first slide."""
        if not self.slides:
            return None
        return [self.kept_prefix, max(self.kept_prefix, self.tail_start)]

    def slide(self, committed: Sequence[int]) -> list[int]:
        """Rebuild the view on head + the most recent text; returns the new view."""
        tail = self.keep_tokens - len(self.slide_head)
        self.head = list(self.slide_head)
        self.tail_start = len(committed) - tail
        self.slides += 1
        return self.visible(committed)

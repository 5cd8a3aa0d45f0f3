"""A document's synopsis written by the model: a take outside the project, made from a request
and run through the same session code as every take (take.py). Nothing is stored: the caller
puts the text in the synopsis field, never in the document."""

from __future__ import annotations

from collections.abc import Callable

from swiftwriter.chat_template import has_chat_template, template_ids
from swiftwriter.engine.decoding.settings import SamplingSettings
from swiftwriter.errors import UserError
from swiftwriter.writing.endings import TakeEnding
from swiftwriter.writing.history import encoder_of
from swiftwriter.writing.take import Take, TakeRequest

SYSTEM = (
    "Summarise the writer's text for their own notes: who, where, what happens, in two or "
    "three plain sentences. Write only the summary."
)
TARGET = 120  # tokens: two or three sentences
TEXT_KEPT = 6000  # characters of the document's end that the model reads


def synopsis_request(loaded, text: str, target: int = TARGET) -> TakeRequest:
    """The take that writes a synopsis of `text`: greedy, through the model's chat template
    when it has one, ending at a blank line."""
    tokenizer = loaded.tokenizer
    body = text.strip()[-TEXT_KEPT:]
    if not body:
        raise UserError("The document is empty: there is nothing to summarise")
    if has_chat_template(tokenizer):
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": body}]
        prompt = template_ids(tokenizer, messages, add_generation_prompt=True)
    else:
        prompt = encoder_of(tokenizer)(body + "\n\nIn short:")
    return TakeRequest(
        None,
        None,
        loaded,
        prompt_text=None,
        prompt_ids=prompt,
        target=target,
        sampling=SamplingSettings(greedy=True, penalty=1.2, window=256),
        history=None,
        measure_baseline=False,
        ending=TakeEnding(target, stops=("\n\n",)),
    )


def write_synopsis(loaded, text: str, should_stop: Callable[[], bool] | None = None) -> str:
    """A short synopsis of `text` by the model ("" when stopped before it began)."""
    result = Take(synopsis_request(loaded, text)).run(should_stop).result
    return result.text.strip() if result is not None else ""

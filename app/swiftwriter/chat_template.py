"""A model's chat template laid out as transformers' `apply_chat_template` lays it out (the
same environment: options, filters, globals; the same variables; the same handling of a last
message to continue), but in `template_sandbox`'s bounded sandbox, because the template comes
from the model's folder: a template that would take the machine's memory or time is refused
in one line naming the model and the limit."""

from __future__ import annotations

import functools

from jinja2 import TemplateError

from swiftwriter.engine.decoding.textgen import encode
from swiftwriter.errors import UserError
from swiftwriter.template_sandbox import BoundedSandbox, Budget, TemplateLimit, render

# a template's source: real ones have 1,000 to 16,000 characters, and compiling one costs
# time and memory in proportion (64 KiB of `{{ a.b.c[d] | trim }}` takes 0.9 s of CPU; 1 MiB
# of `{{ a }}` took 60 s and 1.5 GB)
TEMPLATE_CHARS = 64 << 10
# what a rendered prompt may hold: this many characters beyond eight times its messages
ROOM = 1_000_000
CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "  # transformers' own marker, for the same output


def has_chat_template(tokenizer) -> bool:
    return bool(getattr(tokenizer, "chat_template", None)) and hasattr(
        tokenizer, "get_chat_template"
    )


def template_ids(tokenizer, messages: list[dict], **options) -> list[int]:
    """The ids of `messages` laid out by the tokenizer's chat template (the ids transformers'
    `apply_chat_template(messages, tokenize=True, **options)` gives)."""
    return encode(tokenizer, render_chat(tokenizer, messages, **options))


def render_chat(
    tokenizer, messages: list[dict], *, continue_final_message=False, add_generation_prompt=False
) -> str:
    """The text of `messages` in the tokenizer's chat template, within bounds."""
    name = getattr(tokenizer, "name_or_path", "") or "this model"
    source = tokenizer.get_chat_template()
    if len(source) > TEMPLATE_CHARS:
        raise UserError(f"The chat template of {name} has {len(source):,} characters "
                        f"(limit {TEMPLATE_CHARS:,})")  # fmt: skip
    chat = [dict(message) for message in messages]
    final = chat[-1].get("content", "") if chat else ""
    if continue_final_message:
        if "content" not in source:
            raise UserError(f"The chat template of {name} does not write a message's content")
        chat[-1]["content"] = final + CONTINUE_TAG
    budget = Budget(ROOM + 8 * sum(len(str(m.get("content", ""))) for m in chat))
    variables = {**tokenizer.special_tokens_map, "messages": chat, "tools": None,
                 "documents": None, "add_generation_prompt": add_generation_prompt}  # fmt: skip
    try:
        text = render(_compiled(source), budget, variables)
    except TemplateLimit as exc:
        raise UserError(f"The chat template of {name} was stopped: {exc}") from None
    except (TemplateError, RecursionError, MemoryError, TypeError, ValueError) as exc:
        raise UserError(f"The chat template of {name} failed: {type(exc).__name__}: "
                        f"{str(exc)[:300]}") from None  # fmt: skip
    return _continued(text, final, name) if continue_final_message else text


def _continued(text: str, final: str, name: str) -> str:
    """The text up to the last message's end, left open (as transformers cuts it)."""
    if final.strip() not in text or CONTINUE_TAG.strip() not in text:
        raise UserError(f"The chat template of {name} leaves out part of the last message")
    at = text.rindex(CONTINUE_TAG.strip())
    if text[at : at + len(CONTINUE_TAG)] == CONTINUE_TAG:
        return text[:at]
    return text[:at].rstrip()


@functools.lru_cache(maxsize=8)
def _compiled(source: str):
    return _environment().from_string(source)


@functools.lru_cache(maxsize=1)
def _environment() -> BoundedSandbox:
    """transformers' chat-template environment (its options, extensions, filters and globals:
    taken from it, so a template renders the same), in the bounded sandbox."""
    from transformers.utils.chat_template_utils import _compile_jinja_template  # lazy: transformers

    reference = _compile_jinja_template("").environment
    bounded = BoundedSandbox(
        trim_blocks=reference.trim_blocks,
        lstrip_blocks=reference.lstrip_blocks,
        keep_trailing_newline=reference.keep_trailing_newline,
        extensions=[type(extension) for extension in reference.extensions.values()],
    )
    bounded.filters.update(reference.filters)
    bounded.globals.update(reference.globals)
    return bounded.bound()

"""The tokenizer edge of the engine: text in, text pieces out, decoded incrementally so that a
multi-byte character split across tokens is never shown half-made."""

from __future__ import annotations


def encode(tokenizer, text: str) -> list[int]:
    """Text -> ids without special tokens: the one way text enters the engine (prompts,
    documents, history, training text)."""
    return list(tokenizer.encode(text, add_special_tokens=False)) if text else []


class IncrementalDecoder:
    """Emit only text that later tokens can no longer change (prefix/read offsets, as in TGI)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.prefix_offset = 0
        self.read_offset = 0
        self.shown: list[str] = []

    def push(self, ids: list[int]) -> str:
        self.ids.extend(ids)
        decode = self.tokenizer.decode
        prefix_text = decode(
            self.ids[self.prefix_offset : self.read_offset], skip_special_tokens=True
        )
        new_text = decode(self.ids[self.prefix_offset :], skip_special_tokens=True)
        if len(new_text) > len(prefix_text) and not new_text.endswith("\ufffd"):
            self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
            piece = new_text[len(prefix_text) :]
            self.shown.append(piece)
            return piece
        return ""

    def finish(self) -> str:
        """The text still held back at the end (a last partial glyph), once."""
        full = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        shown = "".join(self.shown)
        tail = full[len(shown) :] if full.startswith(shown) else ""
        if tail:
            self.shown.append(tail)
        return tail


def eos_ids_of(tokenizer, model) -> list[int]:
    ids = set()
    for source in (getattr(model, "generation_config", None), model.config, tokenizer):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return sorted(ids)

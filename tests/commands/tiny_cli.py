"""The CLI on a tiny random model: the model loader replaced, token ids as text (shared by the
command tests; not a test module)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace


class IdTokenizer:
    """Text '5 9 12' is token ids 5, 9, 12: the tiny model needs no real tokenizer."""

    def __call__(self, text, add_special_tokens=False):
        return SimpleNamespace(input_ids=self.encode(text))

    def encode(self, text, add_special_tokens=False):
        return [int(w) for w in text.split()]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(f" {int(i)}" for i in ids)


def install_tiny(monkeypatch, model) -> None:
    """The CLI's model loader returns `model` (with the id tokenizer): nothing is converted."""
    from swiftwriter.modelstore import loader, registry
    from swiftwriter.modelstore.loader import LoadedModel
    from swiftwriter.modelstore.registry import ModelEntry

    entry = ModelEntry(id="tiny", name="tiny", source="folder", path=Path("."))
    loaded = LoadedModel(entry=entry, model=model, tokenizer=IdTokenizer(), device="cpu",
                         dtype="float32")  # fmt: skip
    monkeypatch.setattr(registry, "resolve", lambda name: entry)
    monkeypatch.setattr(loader, "load", lambda *a, **k: loaded)


def word_tokenizer_folder(folder) -> None:
    """A Hugging Face fast tokenizer over a few words, saved beside a model (built here,
    nothing downloaded)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<s>", "</s>", "<unk>", "the", "sea", "wall", "rose", "and", "fell", "at", "night"]
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    ).save_pretrained(folder)

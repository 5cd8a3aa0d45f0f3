"""What the writing layer needs of a loaded model, as a type: the model, its tokenizer and its
registry entry. modelstore's LoadedModel is one; a test's stand-in with the same attributes is
another (the writing layer never loads a model itself)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

    from swiftwriter.modelstore.registry import ModelEntry


class LoadedModelLike(Protocol):
    """A loaded model as a take uses it (modelstore.loader.LoadedModel). Optional extras, read
    with getattr where present: `drafter`, `dtype_why`, `story_bans`."""

    model: torch.nn.Module  # a causal language model the engine runs
    tokenizer: PreTrainedTokenizerBase
    entry: ModelEntry

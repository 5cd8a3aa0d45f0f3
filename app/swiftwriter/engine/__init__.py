"""TokenSwift engine: exact tree speculation on stock Hugging Face causal LMs (no Qt, no store).

Works on token ids; the tokenizer appears only in `textgen`, at the edge."""

from swiftwriter.engine.decoding.settings import DraftSettings, SamplingSettings

__all__ = ["DraftSettings", "Generator", "SamplingSettings", "StepEvent"]


def __getattr__(name: str):
    """The decoding loop on first use: the settings alone load without torch, so the command
    line refuses a bad option before the model's libraries load (seconds)."""
    if name in ("Generator", "StepEvent"):
        from swiftwriter.engine.decoding import (  # lazy: pulls in torch, transformers, numpy
            generator,
        )

        return getattr(generator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

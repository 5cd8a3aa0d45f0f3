"""TokenSwift engine: exact tree speculation on stock Hugging Face causal LMs (no Qt, no store).

Works on token ids; the tokenizer appears only in `textgen`, at the edge."""

from swiftwriter.engine.decoding.generator import Generator, StepEvent
from swiftwriter.engine.decoding.settings import DraftSettings, SamplingSettings

__all__ = ["DraftSettings", "Generator", "SamplingSettings", "StepEvent"]

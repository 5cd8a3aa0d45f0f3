"""What the engine keeps per model: the product kernel its passes use, whether its runs are
exact by default, whether its passes may use the tree-attention kernel, and its measured pass
costs. Held here, weakly keyed by the model object, rather than written onto transformers' or
torch's objects (issue 61): they stay ours to change, and a deep copy of a module starts bare."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field


@dataclass
class ModelSettings:
    kernel: str | None = None  # kernels.STOCK, ONEDNN or PACKED; None until chosen
    exact: bool = True  # runs use batch-invariant passes unless told otherwise
    tree_attention: bool = True  # the native tree-attention kernel may be used
    costs: dict = field(default_factory=dict)  # invariant (bool) -> decoding's CostModel


_SETTINGS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def settings_for(model) -> ModelSettings:
    """This model's settings, made at their defaults the first time it is asked for (they go
    when the model does)."""
    found = _SETTINGS.get(model)
    if found is None:
        found = _SETTINGS.setdefault(model, ModelSettings())
    return found

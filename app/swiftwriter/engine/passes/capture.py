"""Reading the model's state where drafters need it: the last decoder layer's output before
the final norm (which `output_hidden_states` does not give), and the final norm itself."""

from __future__ import annotations

import torch
from torch import nn

from swiftwriter.errors import UserError


def final_norm_of(model) -> nn.Module:
    decoder = model.get_decoder()
    norm = getattr(decoder, "norm", None)
    if norm is None:
        raise UserError("This model has no final norm where drafters expect it")
    return norm


def last_layer_of(model) -> nn.Module:
    return model.get_decoder().layers[-1]


class PrenormCapture:
    """A forward hook on the last decoder layer that keeps its output (the state before the
    final norm), because `output_hidden_states` gives the post-norm state last."""

    def __init__(self, model):
        self.value: torch.Tensor | None = None
        self.handle = last_layer_of(model).register_forward_hook(self._hook)

    def _hook(self, module, args, output):
        self.value = output[0] if isinstance(output, tuple) else output
        return None

    def close(self) -> None:
        self.handle.remove()

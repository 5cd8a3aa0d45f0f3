"""The two drafter kinds, both reading the frozen model's hidden state and scoring tokens with
rows of the model's own frozen lm_head (a frequency-truncated draft vocabulary: the default
model's full lm_head is 28M of its 135M parameters, too slow to run per draft row on a CPU).

- `LinearHeads` (TokenSwift): h_k = h_{k-1} + Linear_k(RMSNorm_k(h_{k-1})) over the last decoder
  layer's output *before* the final norm; head k guesses the token k+1 places after the one the
  model itself predicts. The guesses do not depend on the drafted tokens above them.
- `RecurrentDrafter`: one step reads a feature (the model's final hidden state at position t)
  and the embedding of token t+1, and predicts the feature at t+1; run again on its own
  prediction and the drafted token, so every drafted token conditions the next (EAGLE-1 without
  the attention layer, so it needs no cache of its own and fuses with verification)."""

from __future__ import annotations

import torch
from torch import nn

from swiftwriter.errors import UserError


class LinearHeads(nn.Module):
    kind = "linear"
    feature = "prenorm"

    def __init__(self, hidden: int, n_heads: int = 3, eps: float = 1e-5):
        super().__init__()
        self.n_heads = n_heads
        self.norms = nn.ModuleList(nn.RMSNorm(hidden, eps=eps) for _ in range(n_heads))
        self.linears = nn.ModuleList(nn.Linear(hidden, hidden, bias=False) for _ in range(n_heads))
        self.out_norms = nn.ModuleList(nn.RMSNorm(hidden, eps=eps) for _ in range(n_heads))
        for lin in self.linears:
            nn.init.zeros_(lin.weight)

    def forward(self, h0: torch.Tensor) -> list[torch.Tensor]:
        """h0 [..., H] pre-norm -> one normalised state per head (feed to the draft lm_head)."""
        out, h = [], h0
        for norm, lin, out_norm in zip(self.norms, self.linears, self.out_norms, strict=True):
            h = h + lin(norm(h))
            out.append(out_norm(h))
        return out


class RecurrentDrafter(nn.Module):
    kind = "recurrent"
    feature = "final"

    def __init__(self, hidden: int, intermediate: int | None = None, eps: float = 1e-5):
        super().__init__()
        inter = intermediate or 2 * hidden
        self.fc = nn.Linear(2 * hidden, hidden, bias=False)
        self.norm = nn.RMSNorm(hidden, eps=eps)
        self.gate = nn.Linear(hidden, inter, bias=False)
        self.up = nn.Linear(hidden, inter, bias=False)
        self.down = nn.Linear(inter, hidden, bias=False)
        self.out_norm = nn.RMSNorm(hidden, eps=eps)
        self.in_norm = nn.RMSNorm(hidden, eps=eps)

    def forward(self, feature: torch.Tensor, token_embedding: torch.Tensor) -> torch.Tensor:
        """feature, embedding [..., H] -> predicted next feature [..., H] (same space as
        the model's final hidden state, so the lm_head rows score it directly)."""
        u = self.fc(torch.cat([self.in_norm(feature), token_embedding], dim=-1))
        x = self.norm(u)
        u = u + self.down(nn.functional.silu(self.gate(x)) * self.up(x))
        return feature + self.out_norm(u)


def build(kind: str, hidden: int, eps: float, **kw) -> nn.Module:
    if kind == "linear":
        return LinearHeads(hidden, n_heads=kw.get("n_heads", 3), eps=eps)
    if kind == "recurrent":
        return RecurrentDrafter(hidden, intermediate=kw.get("intermediate"), eps=eps)

    raise UserError(f"Unknown drafter kind '{kind}' (known: linear, recurrent)")

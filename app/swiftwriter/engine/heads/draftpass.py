"""TokenSwift's separate draft pass: after each step the full model runs once more over the
newest token, attending only to a partial KV cache (sinks, top query·key tokens, recent text).
Its hidden state starts the drafters one position later than fused drafting, and its own
next-token guess becomes the trie's first level. It costs a pass of the model per step, so it
only pays where a short-context pass is much cheaper than a long-context one; fused drafting
(the verification pass's own hidden state) costs nothing extra. The benchmark decides."""

from __future__ import annotations

import torch

from swiftwriter.engine.heads.drafters import final_norm_of
from swiftwriter.engine.partial_cache import PartialCache


class DraftPass:
    def __init__(self, model, budget: int, sink: int = 16, recent: int = 256):
        self.model = model
        self.partial = PartialCache(
            model.config, budget=budget, sink=sink, recent=min(recent, budget // 2)
        )
        self.norm = final_norm_of(model)
        self.head = model.get_output_embeddings()

    @torch.inference_mode()
    def run(self, runner, token_id: int, readers) -> None:
        """Hand each drafter the newest token's state and the model's guess of the next token."""
        prenorm = self.partial.draft_from_runner(runner, token_id)[0]
        final = self.norm(prenorm[None])[0]
        logits = self.head(final[None])[0].float()
        for src in readers:
            src.set_pass_feature(prenorm if src.wants_feature == "prenorm" else final, logits)

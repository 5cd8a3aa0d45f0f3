"""An experiment kept beside the benchmark: TokenSwift's separate draft pass. After each step
the full model runs once more over the newest token, attending only to a partial KV cache
(sinks, top query·key tokens, recent text). Its hidden state starts the drafters one position
later than fused drafting, and its own next-token guess becomes the trie's first level. It
costs a pass of the model per step, so it can only pay where a short-context pass is much
cheaper than a long-context one; the app drafts fused (the verification pass's own hidden
state, no extra pass), which won every measured case (README, "Learned drafter"). The bench
runs it with `--draft-mode pass` and `tokenswift-fullcache`."""

from __future__ import annotations

import time

import torch

from swiftwriter.bench.partial_cache import PartialCache
from swiftwriter.engine.decoding.generator import Generator
from swiftwriter.engine.decoding.run import Run
from swiftwriter.engine.passes import final_norm_of


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


class DraftPassRun(Run):
    """A run whose drafters are fed by the draft pass instead of the verification pass."""

    def start(self) -> None:
        super().start()
        self.draft_pass = (
            DraftPass(self.gen.model, self.gen.partial_budget) if self.readers else None
        )

    def draft_ahead(self) -> None:
        if self.draft_pass is not None:
            t = time.perf_counter()
            self.draft_pass.run(self.runner, self.committed[-1], self.readers)
            self.stats.draft_s += time.perf_counter() - t


class DraftPassGenerator(Generator):
    """The generator with the draft-pass run; `partial_budget`: KV tokens per head the draft
    pass attends to (the model's context length: the whole cache)."""

    run_type = DraftPassRun

    def __init__(self, *args, partial_budget: int = 1024, **kwargs):
        if partial_budget < 64:
            raise ValueError(f"The partial cache needs at least 64 tokens, not {partial_budget}")
        super().__init__(*args, **kwargs)
        self.partial_budget = partial_budget

"""An experiment kept beside the benchmark: TokenSwift's separate draft pass. After each step
the full model runs once more over the newest token, attending only to a partial KV cache
(sinks, top query·key tokens, recent text). Its hidden state starts the drafters one position
later than fused drafting, and its own next-token guess becomes the trie's first level. It
costs a pass of the model per step, so it can only pay where a short-context pass is much
cheaper than a long-context one; the app drafts fused (the verification pass's own hidden
state, no extra pass), which won every measured case (README, "Learned drafter"). The bench
runs it with `--draft-mode pass` and `tokenswift-fullcache`.

It lives here whole: the engine's part is the contract every run and drafter keeps (a
`Generator.run_type` subclass overrides stages; the drafter drafts below a given first level,
`DrafterSource.draft`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from swiftwriter.bench.partial_cache import PartialCache
from swiftwriter.engine.decoding.drafter_source import DrafterSource
from swiftwriter.engine.decoding.generator import Generator
from swiftwriter.engine.decoding.logits import penalise
from swiftwriter.engine.decoding.run import Run
from swiftwriter.engine.decoding.sources import Candidate
from swiftwriter.engine.passes import final_norm_of


class PassDrafterSource(DrafterSource):
    """The learned drafter fed by the draft pass: it drafts from the newest token's own state,
    below the model's own guess of the next token (penalised as the target is) as level one."""

    def start(self, sampling, vocab_size: int, window=None) -> None:
        super().start(sampling, vocab_size, window)
        self.penalty = sampling.penalty  # the run's, for the model's own logits
        self.base_logits: torch.Tensor | None = None

    def set_feature(self, feature: torch.Tensor) -> None:
        super().set_feature(feature)
        self.base_logits = None

    def set_pass_feature(self, feature: torch.Tensor, logits: torch.Tensor) -> None:
        """The newest token's own state and the model's guess after it."""
        super().set_feature(feature)
        self.base_logits = logits.detach().to("cpu", torch.float32)

    @torch.inference_mode()
    def propose(self, context: Sequence[int], max_candidates: int) -> list[Candidate]:
        if self.base_logits is None or self.feature is None or not context:
            return super().propose(context, max_candidates)
        full = self.window.presence_on_host() if self.window is not None else None
        probs = penalise(self.base_logits, full, self.penalty).softmax(-1)
        top = probs.topk(self.tree[0])
        first = list(zip(top.indices.tolist(), top.values.tolist(), strict=True))
        return self.draft(context, first, self.tree[1:])


class DraftPass:
    def __init__(self, model, budget: int, sink: int = 16, recent: int = 256):
        self.model = model
        self.partial = PartialCache(
            model.config, budget=budget, sink=sink, recent=min(recent, budget // 2)
        )
        self.norm = final_norm_of(model)
        self.head = model.get_output_embeddings()

    @torch.inference_mode()
    def run(self, runner, token_id: int, readers: Sequence[PassDrafterSource]) -> None:
        """Hand each drafter the newest token's state and the model's guess of the next token."""
        prenorm = self.partial.draft_from_runner(runner, token_id)[0]
        final = self.norm(prenorm[None])[0]
        logits = self.head(final[None])[0].float()
        for src in readers:
            src.set_pass_feature(prenorm if src.wants_feature == "prenorm" else final, logits)


class DraftPassRun(Run):
    """A run whose drafters are fed by the draft pass instead of the verification pass: the
    pass runs where the next step drafts (its time is the step's drafting time), after every
    step that the run goes on from."""

    def start(self) -> None:
        super().start()
        self.pass_readers = [s for s in self.readers if isinstance(s, PassDrafterSource)]
        self.draft_pass = (
            DraftPass(self.gen.model, self.gen.partial_budget) if self.pass_readers else None
        )
        self.pending = False  # a step was committed and the drafters wait for its draft pass

    def commit(self, *args, **kwargs) -> None:
        super().commit(*args, **kwargs)
        self.pending = self.draft_pass is not None

    def propose(self) -> list[Candidate]:
        if self.pending:
            self.draft_pass.run(self.runner, self.committed[-1], self.pass_readers)
            self.pending = False
        return super().propose()


class DraftPassGenerator(Generator):
    """The generator with the draft-pass run; `partial_budget`: KV tokens per head the draft
    pass attends to (the model's context length: the whole cache)."""

    run_type = DraftPassRun

    def __init__(self, *args, partial_budget: int = 1024, **kwargs):
        if partial_budget < 64:
            raise ValueError(f"The partial cache needs at least 64 tokens, not {partial_budget}")
        super().__init__(*args, **kwargs)
        self.partial_budget = partial_budget
        fused = self.drafter_source
        if fused is not None:  # the same drafter and settings, fed by the draft pass
            d = self.drafting
            self.drafter_source = PassDrafterSource(
                fused.bundle, self.model, d.head_tree, d.head_beam, d.head_vocab, grow=d.head_grow
            )

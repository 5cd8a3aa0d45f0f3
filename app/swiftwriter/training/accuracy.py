"""How often a drafter guesses what the target will accept, per draft position: the drafter is
unrolled from the model's feature at position t over the true tokens, and its penalised top-1 /
top-3 at each depth is compared with the model's own penalised first choice there. Used by
training (validation rows) and by the bench (a suite prompt plus the text `ar` wrote for it)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn

from swiftwriter.engine.decoding.logits import penalise
from swiftwriter.training.features import window_presence


def at(values: torch.Tensor, r, t, device) -> torch.Tensor:
    """values[r, t] on `device`: the teacher's features may stay in memory while the drafter
    trains on a GPU (only each batch's rows travel)."""
    return values[r.to(values.device), t.to(values.device)].to(device)


def unroll(
    module: nn.Module, kind: str, data: dict, emb: torch.Tensor, r, t, depth: int
) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
    """Yield (i, state, position whose distribution it should match) for i = 1..depth: linear
    heads from the pre-norm state at t, the recurrent drafter over its own predicted features
    and the true tokens t+1..t+i."""
    if kind == "linear":
        h0 = at(data["prenorm"], r, t, emb.device).float()
        for i, state in enumerate(module(h0), start=1):
            yield i, state, t + i
        return
    p = at(data["final"], r, t, emb.device).float()
    for i in range(1, depth + 1):
        p = module(p, emb[at(data["tokens"], r, t + i, emb.device)].float())
        yield i, p, t + i


def draft_scores(
    state, w: torch.Tensor, tokens, r, pos, to_draft, penalty: float, window: int
) -> torch.Tensor:
    """The drafter's logits over its vocabulary (rows of `w`), penalised over the window that
    ends at `pos`, as the drafter source scores drafts."""
    logits = state @ w.T
    if penalty == 1.0:
        return logits
    presence = window_presence(tokens, r, pos, window, to_draft, w.shape[0])
    return penalise(logits, presence, penalty)


@torch.no_grad()
def hits(
    module: nn.Module,
    kind: str,
    data: dict,
    emb: torch.Tensor,
    w: torch.Tensor,
    vocab: torch.Tensor,
    r,
    t,
    depth: int,
    penalty: float,
    window: int,
) -> dict:
    """{"top1": [per depth], "top3": [...], "positions": n}: the fraction of positions where the
    drafter's top-1 (top-3) holds the target's first choice; an id outside the draft
    vocabulary is a miss."""
    device = emb.device
    vocab = vocab.to(device)
    to_draft = torch.full((emb.shape[0],), -1, dtype=torch.long, device=device)
    to_draft[vocab] = torch.arange(len(vocab), device=device)
    tokens = data["tokens"].to(device)
    r, t = r.to(device), t.to(device)
    top1, top3 = [], []
    for _i, state, pos in unroll(module, kind, data, emb, r, t, depth):
        scores = draft_scores(state, w, tokens, r, pos, to_draft, penalty, window)
        best = vocab[scores.topk(3, dim=-1).indices]
        want = at(data["top_ids"], r, pos, device)[:, 0].long()
        top1.append(round(float((best[:, 0] == want).float().mean()), 4))
        top3.append(round(float((best == want[:, None]).any(-1).float().mean()), 4))
    return {"top1": top1, "top3": top3, "positions": len(r)}


@torch.no_grad()
def on_text(
    model,
    bundle,
    ids: list[int],
    start: int,
    penalty: float,
    window: int,
    depth: int = 3,
    vocab_limit: int = 0,
) -> dict:
    """A drafter's hits on one text (the prompt and what the model wrote after it), counted at
    the written positions only (from `start`): one pass of the model gives the features and
    the target's penalised choices; the drafter's scores get the penalty the drafter source
    gives them."""
    from swiftwriter.engine.decoding.drafter_source import draft_penalty_share
    from swiftwriter.training.features import extract_rows

    draft_penalty = 1.0 + (penalty - 1.0) * draft_penalty_share(bundle.card)

    rows = torch.tensor([ids], dtype=torch.long)
    data = extract_rows(model, rows, penalty=penalty, window=window)
    data["tokens"] = rows
    n = len(ids) - depth - 1
    t = torch.arange(max(0, start - 1), n)
    if len(t) == 0:
        return {"top1": [], "top3": [], "positions": 0}
    r = torch.zeros_like(t)
    head = model.get_output_embeddings().weight.detach().cpu()
    vocab = bundle.vocab[:vocab_limit] if vocab_limit > 0 else bundle.vocab  # as the source
    w = head[vocab].float()
    emb = model.get_input_embeddings().weight.detach().cpu()
    module = bundle.module
    dtype = next(module.parameters()).dtype
    module.float()
    try:
        return hits(module, bundle.kind, data, emb, w, vocab, r, t, depth, draft_penalty, window)
    finally:
        module.to(dtype)

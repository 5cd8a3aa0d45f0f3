"""How often a drafter guesses what the target will accept, per draft position: the drafter is
unrolled from the model's feature at position t over the true tokens, and its penalised top-1 /
top-3 at each depth is compared with the model's own penalised first choice there. Used by
training (validation rows) and by the bench (a suite prompt plus the text `ar` wrote for it).

Sampled modes draw by Gumbel-max under noise shared with the drafter (logits.Draws), so there
the measure is the coupled agreement: the probability that the drafter's draw argmax(log q + g)
is the target's argmax(log p + g), computed exactly (`coupled_agreement`), not estimated."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import torch
from torch import nn

from swiftwriter.engine.decoding.drafter_source import draft_penalty_share
from swiftwriter.engine.decoding.logits import LogitsPipeline, penalise
from swiftwriter.engine.decoding.settings import SamplingSettings
from swiftwriter.engine.passes import row_values, table_of
from swiftwriter.training.features import TOP, extract_rows, window_presence


def coupled_agreement(
    p: torch.Tensor,
    q: torch.Tensor,
    p_rest: torch.Tensor | None = None,
    q_rest: torch.Tensor | None = None,
) -> torch.Tensor:
    """P(argmax(log p + g) == argmax(log q + g)) for standard Gumbel g shared by both: p, q
    [..., K] probabilities over the same K distinct tokens -> [...]. Exactly
    sum_i p_i q_i / sum_j max(p_j q_i, q_j p_i): token i wins both draws when every g_j stays
    below g_i + log min(p_i / p_j, q_i / q_j), and integrating over g_i gives 1 / sum_j
    max(p_j / p_i, q_j / q_i). `p_rest`, `q_rest` [...]: mass outside the K tokens, counted as
    if on tokens the other never draws (a lower bound where they overlap). Differentiable:
    it is also a training loss (train.coupled_loss); 1 where p equals q."""
    num = p * q
    den = torch.maximum(p[..., None, :] * q[..., :, None], q[..., None, :] * p[..., :, None])
    den = den.sum(-1)
    if p_rest is not None:
        den = den + p_rest[..., None] * q
    if q_rest is not None:
        den = den + q_rest[..., None] * p
    return (num / (den + (num == 0))).sum(-1)  # a term without both masses is 0 (no 0/0)


def aligned(
    p_ids: torch.Tensor, p: torch.Tensor, q_ids: torch.Tensor, q: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two distributions given as (ids, probabilities) [B, K1], [B, K2] (ids distinct within a
    row) on common columns [B, K1 + K2]: q's mass on p's ids moves to p's columns, the rest
    keeps its own; with each side's mass outside its list (p_rest, q_rest [B])."""
    same = q_ids[:, :, None] == p_ids[:, None, :]  # [B, K2, K1]
    q_on_p = (q[:, :, None] * same).sum(1)
    q_elsewhere = torch.where(same.any(-1), torch.zeros_like(q), q)
    pp = torch.cat([p, torch.zeros_like(q)], -1)
    qq = torch.cat([q_on_p, q_elsewhere], -1)
    return pp, qq, (1 - pp.sum(-1)).clamp_min(0), (1 - qq.sum(-1)).clamp_min(0)


def agreement_of(
    p_ids: torch.Tensor, p: torch.Tensor, q_ids: torch.Tensor, q: torch.Tensor
) -> torch.Tensor:
    """`coupled_agreement` of two distributions given as (ids, probabilities) [B, K1], [B, K2]
    (each holding its whole support, e.g. a filtered distribution's top 32)."""
    return coupled_agreement(*aligned(p_ids, p, q_ids, q))


def total_variation_of(
    p_ids: torch.Tensor, p: torch.Tensor, q_ids: torch.Tensor, q: torch.Tensor
) -> torch.Tensor:
    """TV(p, q) = 1 - sum_x min(p(x), q(x)) of two distributions given as (ids, probabilities)
    [B, K1], [B, K2] -> [B]: what a draft from q is rejected at, on average, by speculative
    sampling against p (accepted with min(1, p/q)), the "fastest" sampler's walk. Mass outside
    either list counts as not shared (an upper bound where the lists leave some out)."""
    pp, qq, _, _ = aligned(p_ids, p, q_ids, q)
    return (1 - torch.minimum(pp, qq).sum(-1)).clamp(0, 1)


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
    filters: LogitsPipeline | None = None,
) -> dict:
    """{"top1": [per depth], "top3": [...], "positions": n}: the fraction of positions where the
    drafter's top-1 (top-3) holds the target's first choice; an id outside the draft
    vocabulary is a miss. With `filters` (a sampled preset's pipeline without its penalty,
    which both sides already have) also "coupled": the mean agreement under shared noise of
    the drafter's filtered distribution with the target's (`data["sampled_ids"]` and
    `["sampled_probs"]` where extract_rows made them, else from the teacher's top 32), and
    "tv": their mean total variation (1 - the rejection walk's acceptance of one draft)."""
    device = emb.device
    vocab = vocab.to(device)
    to_draft = torch.full((emb.shape[0],), -1, dtype=torch.long, device=device)
    to_draft[vocab] = torch.arange(len(vocab), device=device)
    tokens = data["tokens"].to(device)
    r, t = r.to(device), t.to(device)
    top1, top3, coupled, tv = [], [], [], []
    for _i, state, pos in unroll(module, kind, data, emb, r, t, depth):
        scores = draft_scores(state, w, tokens, r, pos, to_draft, penalty, window)
        best = vocab[scores.topk(3, dim=-1).indices]
        want = at(data["top_ids"], r, pos, device)[:, 0].long()
        top1.append(round(float((best[:, 0] == want).float().mean()), 4))
        top3.append(round(float((best == want[:, None]).any(-1).float().mean()), 4))
        if filters is not None:
            if "sampled_ids" in data:
                p_ids = at(data["sampled_ids"], r, pos, device).long()
                p = at(data["sampled_probs"], r, pos, device).float()
            else:
                p_ids, p = preset_target(
                    at(data["top_ids"], r, pos, device), at(data["top_probs"], r, pos, device),
                    filters,
                )  # fmt: skip
            q = filters.process(scores, None).softmax(-1).topk(min(TOP, scores.shape[-1]))
            got = agreement_of(p_ids, p, vocab[q.indices], q.values)
            coupled.append(round(float(got.mean()), 4))
            apart = total_variation_of(p_ids, p, vocab[q.indices], q.values)
            tv.append(round(float(apart.mean()), 4))
    out = {"top1": top1, "top3": top3, "positions": len(r)}
    if filters is not None:
        out["coupled"], out["tv"] = coupled, tv
    return out


def preset_target(
    top_ids: torch.Tensor, top_probs: torch.Tensor, filters: LogitsPipeline
) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, probabilities) [..., 32] of a sampled preset's distribution made from the
    teacher's penalised top 32 (temperature, top-p, min-p over those 32: the tail beyond them,
    which the filters all but always cut, is left out)."""
    logp = top_probs.float().clamp_min(1e-30).log()
    return top_ids.long(), filters.process(logp, None).softmax(-1)


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
    sampling: SamplingSettings | None = None,
    data: dict | None = None,
) -> dict:
    """A drafter's hits on one text (the prompt and what the model wrote after it), counted at
    the written positions only (from `start`): one pass of the model gives the features and
    the target's penalised choices; the drafter's scores get the penalty the drafter source
    gives them. A sampled `sampling` adds the coupled agreement per depth ("coupled"), the
    drafter filtered as the drafter source filters it (its DRY is left out). `data`: that
    pass's result (`text_data`), to measure several drafters on one text."""
    draft_penalty = 1.0 + (penalty - 1.0) * draft_penalty_share(bundle.card)
    filters = _filters(sampling)
    if data is None:
        data = text_data(model, ids, penalty, window, sampling)
    n = len(ids) - depth - 1
    t = torch.arange(max(0, start - 1), n)
    if len(t) == 0:
        return {"top1": [], "top3": [], "positions": 0}
    r = torch.zeros_like(t)
    vocab = bundle.vocab[:vocab_limit] if vocab_limit > 0 else bundle.vocab  # as the source
    w = row_values(model.get_output_embeddings(), vocab).cpu()
    emb = table_of(model.get_input_embeddings())
    emb = emb.cpu() if isinstance(emb, torch.Tensor) else emb
    module = bundle.module
    dtype = next(module.parameters()).dtype
    module.float()
    try:
        return hits(
            module, bundle.kind, data, emb, w, vocab, r, t, depth, draft_penalty, window, filters
        )
    finally:
        module.to(dtype)


def _filters(sampling: SamplingSettings | None) -> LogitsPipeline | None:
    if sampling is None or sampling.greedy:
        return None
    return LogitsPipeline(replace(sampling, penalty=1.0, dry_multiplier=0.0))


def text_data(
    model, ids: list[int], penalty: float, window: int, sampling: SamplingSettings | None = None
) -> dict:
    """The model's pass over one text that `on_text` measures drafters on."""
    rows = torch.tensor([ids], dtype=torch.long)
    data = extract_rows(model, rows, penalty=penalty, window=window, filters=_filters(sampling))
    data["tokens"] = rows
    return data

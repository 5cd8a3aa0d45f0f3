"""EAGLE's attention-layer drafter, tried against the recurrent drafter the engine ships.

The recurrent drafter (engine/decoding/drafters.py) reads only the model's feature at the last
accepted token and the next token's embedding. EAGLE puts one decoder layer there instead:
causal self-attention over the whole sequence of (feature, next token) pairs, so a drafted step
also sees the features before it, at the price of a key/value cache of the drafter's own and
more weights read per drafting step. This module trains one on the same teacher features, for
the same steps and positions per step as a recurrent drafter, and scores both with the same
measure (penalised top-1 / top-3 against the target's penalised first choice at draft depths
1 to 3, on the model's own text after held-out prompts), to decide whether it is worth fusing
into the engine.

Deeper steps are trained as they would be drafted (EAGLE-3's training-time test): the query of
depth i at position t sees the true pairs up to t and its own chain's earlier entries at t, never
another position's guesses.

    .venv/bin/python -m experiments.eagle_trial --features DIR/work --recurrent DIR --steps 600

(from the top of the checkout: an experiment, not shipped in the package)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from swiftwriter.training import accuracy, features
from swiftwriter.training.train import Trainer, TrainSettings
from torch import nn
from torch.nn import functional as F


class AttentionDrafter(nn.Module):
    """One decoder layer (rotary causal attention, SwiGLU) over (feature, next-token) pairs,
    predicting the next feature; the same input projection and residual form as the recurrent
    drafter, so both start from "the feature stays"."""

    kind = "attention"
    feature = "final"

    def __init__(self, hidden: int, heads: int = 9, intermediate: int | None = None, eps=1e-5):
        super().__init__()
        if hidden % heads:
            raise ValueError("hidden must divide into the heads")
        inter = intermediate or 2 * hidden
        self.heads, self.head_dim = heads, hidden // heads
        self.in_norm = nn.RMSNorm(hidden, eps=eps)
        self.fc = nn.Linear(2 * hidden, hidden, bias=False)
        self.attn_norm = nn.RMSNorm(hidden, eps=eps)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)
        self.norm = nn.RMSNorm(hidden, eps=eps)
        self.gate = nn.Linear(hidden, inter, bias=False)
        self.up = nn.Linear(hidden, inter, bias=False)
        self.down = nn.Linear(inter, hidden, bias=False)
        self.out_norm = nn.RMSNorm(hidden, eps=eps)

    def _rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        half = self.head_dim // 2
        freq = 10000.0 ** (-torch.arange(half, dtype=torch.float32) / half)
        angle = positions.float()[:, None] * freq[None, :]  # [T, half]
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        a, b = x[..., :half], x[..., half : 2 * half]
        return torch.cat([a * cos - b * sin, a * sin + b * cos, x[..., 2 * half :]], dim=-1)

    def unroll(self, feats: torch.Tensor, embs: list[torch.Tensor]) -> list[torch.Tensor]:
        """feats [B, T, H] (the model's features at t), embs[i] [B, T, H] (token t+1+i) ->
        predicted features at t+1+i for each depth i, under the training-time-test mask."""
        b, t, h = feats.shape
        positions = torch.arange(t)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        own = torch.eye(t, dtype=torch.bool)
        keys, values, outs = [], [], []
        inp = feats
        for depth, emb in enumerate(embs):
            u = self.fc(torch.cat([self.in_norm(inp), emb], dim=-1))
            q, k, v = self.qkv(self.attn_norm(u)).view(b, t, 3, self.heads, self.head_dim).unbind(2)
            q, k, v = (x.transpose(1, 2) for x in (q, k, v))  # [B, heads, T, d]
            q, k = self._rotate(q, positions + depth), self._rotate(k, positions + depth)
            keys.append(k)
            values.append(v)
            mask = torch.cat([causal] + [own] * depth, dim=1)
            a = F.scaled_dot_product_attention(
                q, torch.cat(keys, dim=2), torch.cat(values, dim=2), attn_mask=mask
            )
            u = u + self.o(a.transpose(1, 2).reshape(b, t, h))
            x = self.norm(u)
            u = u + self.down(F.silu(self.gate(x)) * self.up(x))
            inp = inp + self.out_norm(u)
            outs.append(inp)
        return outs


class AttentionTrainer(Trainer):
    """The recurrent trainer's data, draft vocabulary, target, loss terms and schedule, with
    windows of `span` consecutive positions instead of scattered ones (attention needs the
    sequence); `batch // span` windows per step keep the positions per step equal."""

    def __init__(self, model, data: dict, settings: TrainSettings, span: int = 256):
        super().__init__(model, "trial", data, settings)
        hidden = int(model.config.hidden_size)
        torch.manual_seed(settings.seed)
        self.module = AttentionDrafter(hidden, heads=max(1, hidden // 64), eps=self.eps)
        self.opt = torch.optim.AdamW(
            self.module.parameters(), lr=settings.learning_rate(), weight_decay=0.0
        )
        self.span = min(span, data["tokens"].shape[1] - settings.depth - 1)
        self.windows = max(1, settings.batch // self.span)

    def _predictions(self, r, s):
        """r, s [W] rows and window starts -> (flat rows, [(depth, flat states, flat pos)])."""
        offsets = s[:, None] + torch.arange(self.span)[None, :]  # [W, span]
        rows = r[:, None].expand_as(offsets)
        feats = self.data["final"][rows, offsets].float()
        embs = [
            self.emb[self.data["tokens"][rows, offsets + i]].float()
            for i in range(1, self.s.depth + 1)
        ]
        flat_r = rows.reshape(-1)
        out = []
        for i, state in enumerate(self.module.unroll(feats, embs), start=1):
            out.append((i, state.reshape(-1, state.shape[-1]), (offsets + i).reshape(-1)))
        return flat_r, out

    def loss(self, r, t) -> torch.Tensor:
        flat_r, preds = self._predictions(r, t)
        total = 0.0
        for i, state, pos in preds:
            term = self._soft_ce(state, flat_r, pos)
            target = self.data["final"][flat_r, pos].float()
            term = term + self.s.feature_weight * F.smooth_l1_loss(state, target)
            total = total + 0.8 ** (i - 1) * term
        return total

    def draw(self) -> tuple[torch.Tensor, torch.Tensor]:
        """This step's windows: (rows, window starts), reproducible per step."""
        g = torch.Generator().manual_seed(self.s.seed * 1_000_003 + self.step)
        r = self.train_rows[torch.randint(len(self.train_rows), (self.windows,), generator=g)]
        limit = self.data["tokens"].shape[1] - self.span - self.s.depth
        return r, torch.randint(max(1, limit), (self.windows,), generator=g)


@torch.no_grad()
def attention_hits(module, data, emb, w, vocab, start: int, depth: int, penalty, window) -> dict:
    """`accuracy.hits` for the attention drafter on one text row (positions from `start`)."""
    length = data["tokens"].shape[1]
    t = torch.arange(length - depth - 1)
    feats = data["final"][0, t].float()[None]
    embs = [emb[data["tokens"][0, t + i]].float()[None] for i in range(1, depth + 1)]
    to_draft = torch.full((emb.shape[0],), -1, dtype=torch.long)
    to_draft[vocab] = torch.arange(len(vocab))
    keep = t >= max(0, start - 1)
    r = torch.zeros(int(keep.sum()), dtype=torch.long)
    top1, top3 = [], []
    for i, state in enumerate(module.unroll(feats, embs), start=1):
        pos = t[keep] + i
        scores = accuracy.draft_scores(
            state[0, keep], w, data["tokens"], r, pos, to_draft, penalty, window
        )
        best = vocab[scores.topk(3, dim=-1).indices]
        want = data["top_ids"][0, pos, 0].long()
        top1.append(float((best[:, 0] == want).float().sum()))
        top3.append(float((best == want[:, None]).any(-1).float().sum()))
    return {"top1": top1, "top3": top3, "positions": len(r)}


def held_out_texts(model, tokenizer, names: list[str], new_tokens: int, penalty: float, window):
    """(ids, prompt length) per suite prompt: the prompt and the model's own penalised greedy
    continuation (the text a drafter must guess when the writer asks for more)."""
    from swiftwriter.bench.suite import load_suite, select
    from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
    from swiftwriter.engine.decoding.textgen import encode

    sampling = SamplingSettings(greedy=True, penalty=penalty, window=window)
    out = []
    for prompt in select(load_suite(), ",".join(names)):
        ids = encode(tokenizer, prompt.text)
        gen = Generator(model, sampling, DraftSettings.plain())
        written = [tok for ev in gen.generate(ids, new_tokens) for tok in ev.tokens]
        out.append((ids + written, len(ids)))
    return out


def score(kind: str, module, model, vocab, texts, penalty, window, depth=3) -> dict:
    """Top-1 / top-3 per depth over all texts, the recurrent drafter by accuracy.hits (both
    over the draft-vocabulary prefix the engine drafts with, DraftSettings.head_vocab)."""
    from swiftwriter.engine.decoding.settings import DraftSettings

    vocab = vocab[: DraftSettings.head_vocab]
    emb = model.get_input_embeddings().weight.detach().float()
    w = model.get_output_embeddings().weight.detach()[vocab].float()
    totals = {"top1": [0.0] * depth, "top3": [0.0] * depth, "positions": 0}
    module = module.float().eval()
    for ids, start in texts:
        rows = torch.tensor([ids])
        data = features.extract_rows(model, rows, penalty=penalty, window=window)
        data["tokens"] = rows
        if kind == "attention":
            got = attention_hits(module, data, emb, w, vocab, start, depth, penalty, window)
        else:
            t = torch.arange(max(0, start - 1), len(ids) - depth - 1)
            r = torch.zeros_like(t)
            got = accuracy.hits(module, kind, data, emb, w, vocab, r, t, depth, penalty, window)
            got = {k: [v * len(t) for v in got[k]] for k in ("top1", "top3")} | {
                "positions": len(t)
            }
        for key in ("top1", "top3"):
            totals[key] = [a + b for a, b in zip(totals[key], got[key], strict=True)]
        totals["positions"] += got["positions"]
    n = max(1, totals["positions"])
    return {
        "top1": [round(v / n, 4) for v in totals["top1"]],
        "top3": [round(v / n, 4) for v in totals["top3"]],
        "positions": totals["positions"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.eagle_trial")
    p.add_argument("--features", required=True, type=Path, help="a `heads train` DIR/work")
    p.add_argument("--recurrent", type=Path, help="a recurrent drafter trained on the same")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--span", type=int, default=256)
    p.add_argument("--prompts", default="ferry,quarterly,design,kitchen,minutes,salvage")
    p.add_argument("--new-tokens", type=int, default=384)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    from swiftwriter.engine.decoding import drafter_files as files
    from swiftwriter.modelstore import loader, registry

    loaded = loader.load(registry.resolve(None), dtype="bfloat16", with_drafter=False)
    model = loaded.model
    texts = sorted(args.features.glob("*.safetensors"))
    texts = [t for t in texts if not t.name.startswith("feat-")]
    settings = TrainSettings(steps=args.steps)
    feats = features.ensure_features(model, texts, penalty=settings.penalty, window=settings.window)
    data = features.load_features(feats, texts)
    trainer = AttentionTrainer(model, data, settings, span=args.span)
    began = time.time()
    while trainer.step < settings.steps:
        loss = trainer.train_step()
        if trainer.step % 50 == 0:
            print(f"step {trainer.step}/{settings.steps} loss {loss:.3f}", flush=True)
    seconds = time.time() - began
    held = held_out_texts(
        model, loaded.tokenizer, args.prompts.split(","), args.new_tokens, 1.2, 1024
    )
    report = {
        "steps": settings.steps,
        "train_seconds": round(seconds, 1),
        "params": sum(x.numel() for x in trainer.module.parameters()),
        "attention": score("attention", trainer.module, model, trainer.vocab, held, 1.2, 1024),
    }
    if args.recurrent:
        bundle = files.load(args.recurrent, model)
        report["recurrent"] = score(
            bundle.kind, bundle.module, model, bundle.vocab, held, 1.2, 1024
        )
        report["recurrent_params"] = sum(x.numel() for x in bundle.module.parameters())
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

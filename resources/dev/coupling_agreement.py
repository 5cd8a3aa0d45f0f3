"""How often the drafter's candidates hold the token the target samples: its most likely
tokens against its own draws under the target's Gumbel noise (engine/decoding/logits.py `Draws`).

Offline, on text the default model itself samples after held-out prompts: at each position the
target's processed distribution p (penalty, temperature, top-p, min-p) and the shipped
drafter's q (its penalty share, then the same filters, on its draft vocabulary). Acceptance of
the k most likely tokens of q is p's mass on them; acceptance under shared noise is estimated
by 4,000 noise draws per position over the union of both supports (a token outside both never
wins). Run: `.venv/bin/python resources/dev/coupling_agreement.py [PROMPTS] [TOKENS]`."""

from __future__ import annotations

import sys
from dataclasses import replace

import torch
from swiftwriter import paths
from swiftwriter.engine.decoding.drafter_source import draft_penalty_share
from swiftwriter.engine.decoding.generator import Generator
from swiftwriter.engine.decoding.logits import LogitsPipeline, PenaltyWindow, penalise
from swiftwriter.engine.decoding.settings import MODES, DraftSettings, SamplingSettings
from swiftwriter.modelstore import loader, registry

PRESETS = {
    "creative": replace(MODES["creative"], seed=1),
    "tokenswift": SamplingSettings(greedy=False, min_p=0.1, seed=1),
}
DRAWS = 4000
PROMPT_TOKENS = 400  # each prompt's last 400 tokens


def sampled_text(model, ids: list[int], settings: SamplingSettings, n: int) -> list[int]:
    gen = Generator(model, settings, DraftSettings.plain())
    return [t for ev in gen.generate(ids, n) for t in ev.tokens]


def agreement(p: torch.Tensor, q: torch.Tensor, q_raw: torch.Tensor) -> dict[str, float]:
    likely = q_raw.topk(3).indices
    support = ((p > 0) | (q > 0)).nonzero().flatten()
    g = -torch.log(-torch.log(torch.rand(DRAWS, len(support)).clamp_min(1e-12)))
    target = (p[support].log() + g).argmax(-1)
    drawn = (q[support].log() + g).topk(min(3, len(support)), dim=-1).indices
    return {
        "likely top-1": float(p[likely[:1]].sum()),
        "likely top-3": float(p[likely].sum()),
        "coupled top-1": float((drawn[:, 0] == target).float().mean()),
        "coupled top-3": float((drawn == target[:, None]).any(-1).float().mean()),
        "TV(p, q)": 0.5 * float((p - q).abs().sum()),
    }


def main(names: list[str], n: int) -> None:
    torch.manual_seed(0)
    loaded = loader.load(registry.default_entry(), device="cpu", dtype="float32")
    model, tokenizer = loaded.model, loaded.tokenizer
    bundle, status = loader.load_drafter(loaded)
    print("drafter", status, flush=True)
    vocab = bundle.vocab[:2048]
    head = model.get_output_embeddings().weight.detach()[vocab]
    embed = model.get_input_embeddings().weight.detach()
    drafter = bundle.module.float().eval()
    share = draft_penalty_share(bundle.card)
    size = model.config.vocab_size
    for preset, settings in PRESETS.items():
        target = LogitsPipeline(settings)
        filters = LogitsPipeline(replace(settings, penalty=1.0))
        theta = 1.0 + (settings.penalty - 1.0) * share
        totals: dict[str, float] = {}
        count = 0
        for name in names:
            text = (paths.resources_dir() / f"prompts/heldout/{name}.txt").read_text()
            ids = tokenizer(text, add_special_tokens=False).input_ids[-PROMPT_TOKENS:]
            new = sampled_text(model, ids, settings, n)
            seq = torch.tensor([ids + new])
            with torch.inference_mode():
                out = model(seq, output_hidden_states=True)
            logits, final = out.logits[0].float(), out.hidden_states[-1][0].float()
            window = PenaltyWindow(size, settings.window)
            window.extend(ids)
            for j, token in enumerate(new):
                at = len(ids) + j
                presence = window.presence()
                p = target.process(logits[at - 1], presence).softmax(-1)
                with torch.inference_mode():
                    state = drafter(final[at - 2][None], embed[seq[0, at - 1]][None])
                scores = torch.full((size,), float("-inf"))
                scores[vocab] = penalise((state @ head.T)[0].float(), presence[vocab], theta)
                q = filters.process(scores, None).softmax(-1)
                for key, value in agreement(p, q, scores.softmax(-1)).items():
                    totals[key] = totals.get(key, 0.0) + value
                count += 1
                window.extend([token])
            print(preset, name, {k: round(v / count, 3) for k, v in totals.items()}, flush=True)
        print("==", preset, count, "positions", {k: round(v / count, 3) for k, v in totals.items()})


if __name__ == "__main__":
    main((sys.argv[1] if len(sys.argv) > 1 else "orchard,quarterly,design").split(","),
         int(sys.argv[2]) if len(sys.argv) > 2 else 300)  # fmt: skip

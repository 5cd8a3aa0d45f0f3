"""The prepared GPU check (resources/bench/gpu-check.sh): one run on a machine with one NVIDIA GPU
and no network, from the source tree, that writes one JSON and a short text summary.

No model is downloaded: Llama-3.1-8B- and Qwen2.5-1.5B-shaped models are built from their
configurations with random weights, in bfloat16, on the GPU. It measures
  (a) exactness: tree rows against one-token passes (batch invariance) and greedy tokenswift
      against plain decoding, on tiny and 1.5B-shaped models in bf16 and fp16;
  (a') the same per decoder family writers use (Llama 3.x, Mistral, Qwen2.5, Qwen3, Gemma 2,
      Gemma 3, Phi-3, OLMo 2, Granite) at its real width and vocabulary with four layers, in
      bf16 and fp16: tokenswift = ar (plain decoding) per family and dtype;
  (b) the verification cost curve of the 8B-shaped model at several cached lengths, ours
      against stock transformers;
  (c) per-step host overhead against model time at 1 and 16 tree tokens (synchronised timing);
  (d) a long tokenswift run against `hf` on the 1.5B-shaped model with n-gram drafts (random
      weights make the text repetitive: tau is not representative; the overhead and the verify
      curve are the figures that count).
`--smoke` runs every part with tiny shapes and lengths on the CPU (what the tests run);
`--families` picks the families (a comma list, or "none")."""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

LLAMA_8B = dict(
    model_type="llama", hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
    num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
    max_position_embeddings=131072, rope_theta=500000.0, rms_norm_eps=1e-5,
    tie_word_embeddings=False,
)  # fmt: skip
QWEN_1_5B = dict(
    model_type="qwen2", hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
    num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
    max_position_embeddings=131072, rope_theta=1000000.0, rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)  # fmt: skip
TINY = dict(
    model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, vocab_size=1024, max_position_embeddings=4096,
    tie_word_embeddings=False,
)  # fmt: skip


# The families writers use at their real width, heads and vocabulary (published configs), with
# FAMILY_LAYERS layers: a layer's exactness does not depend on how many follow it, the time does.
FAMILY_LAYERS = 4
FAMILIES = {
    "llama3.2-1b": dict(
        model_type="llama", hidden_size=2048, intermediate_size=8192, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64, vocab_size=128256, max_position_embeddings=131072,
        rms_norm_eps=1e-5, tie_word_embeddings=True,
        rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=32.0,
                             low_freq_factor=1.0, high_freq_factor=4.0,
                             original_max_position_embeddings=8192),
    ),
    "mistral-7b-v0.3": dict(
        model_type="mistral", hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, vocab_size=32768, max_position_embeddings=32768,
        rms_norm_eps=1e-5, sliding_window=None, tie_word_embeddings=False,
        rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
    ),
    "qwen2.5-1.5b": dict(
        model_type="qwen2", hidden_size=1536, intermediate_size=8960, num_attention_heads=12,
        num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768,
        rms_norm_eps=1e-6, tie_word_embeddings=True,
        rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
    ),
    "qwen3-1.7b": dict(
        model_type="qwen3", hidden_size=2048, intermediate_size=6144, num_attention_heads=16,
        num_key_value_heads=8, head_dim=128, vocab_size=151936, max_position_embeddings=40960,
        rms_norm_eps=1e-6, tie_word_embeddings=True,
        rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
    ),
    "gemma2-2b": dict(
        model_type="gemma2", hidden_size=2304, intermediate_size=9216, num_attention_heads=8,
        num_key_value_heads=4, head_dim=256, vocab_size=256000, max_position_embeddings=8192,
        rms_norm_eps=1e-6, query_pre_attn_scalar=256, sliding_window=4096,
        attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
        hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
    ),
    "gemma3-1b": dict(
        model_type="gemma3_text", hidden_size=1152, intermediate_size=6912, num_attention_heads=4,
        num_key_value_heads=1, head_dim=256, vocab_size=262144, max_position_embeddings=32768,
        rms_norm_eps=1e-6, query_pre_attn_scalar=256, sliding_window=512,
        hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
    ),
    "phi3-mini": dict(
        model_type="phi3", hidden_size=3072, intermediate_size=8192, num_attention_heads=32,
        num_key_value_heads=32, vocab_size=32064, max_position_embeddings=4096,
        original_max_position_embeddings=4096, rms_norm_eps=1e-5, sliding_window=2047,
        tie_word_embeddings=False,
    ),
    "olmo2-1b": dict(
        model_type="olmo2", hidden_size=2048, intermediate_size=8192, num_attention_heads=16,
        num_key_value_heads=16, vocab_size=100352, max_position_embeddings=4096,
        rms_norm_eps=1e-6, tie_word_embeddings=False,
        rope_parameters=dict(rope_type="default", rope_theta=500000.0),
    ),
    "granite3-2b": dict(
        model_type="granite", hidden_size=2048, intermediate_size=8192, num_attention_heads=32,
        num_key_value_heads=8, vocab_size=49155, max_position_embeddings=131072,
        rms_norm_eps=1e-5, embedding_multiplier=12.0, residual_multiplier=0.22,
        attention_multiplier=0.015625, logits_scaling=8.0, tie_word_embeddings=True,
        rope_parameters=dict(rope_type="default", rope_theta=5000000.0),
    ),
}  # fmt: skip
# the prompt of the family check: longer than Gemma 3's 512-token window, so it slides (the
# smoke run's windows are 8 tokens)
FAMILY_PROMPT, SMOKE_FAMILY_PROMPT = 640, 96


def family_shape(name: str, smoke: bool) -> dict:
    """The family's configuration with FAMILY_LAYERS layers; `smoke`: the same family at a tiny
    width (every family-specific field kept, windows of 8 tokens so they slide)."""
    shape = dict(FAMILIES[name], num_hidden_layers=FAMILY_LAYERS)
    if smoke:
        ratio = shape["num_attention_heads"] // shape["num_key_value_heads"]
        shape.update(
            hidden_size=64, intermediate_size=128, num_attention_heads=4,
            num_key_value_heads=max(1, 4 // ratio), vocab_size=512, num_hidden_layers=2,
            max_position_embeddings=4096, bos_token_id=0, eos_token_id=1, pad_token_id=None,
        )  # fmt: skip
        if "head_dim" in shape:
            shape["head_dim"] = 16
        if "query_pre_attn_scalar" in shape:
            shape["query_pre_attn_scalar"] = 16
        if shape.get("sliding_window"):
            shape["sliding_window"] = 8
        rope = shape.get("rope_parameters") or {}
        if "original_max_position_embeddings" in rope:
            shape["rope_parameters"] = dict(rope, original_max_position_embeddings=256)
    if shape["model_type"] == "gemma3_text":  # five local layers to one global, the last global
        n = shape["num_hidden_layers"]
        shape["layer_types"] = [
            "full_attention" if (i + 1) % 6 == 0 or i == n - 1 else "sliding_attention"
            for i in range(n)
        ]
    return shape


def build(shape: dict, device: str, dtype, seed: int = 0, sharpen: bool = False):
    """A causal LM of this shape with random weights (initialised on the device). `sharpen`:
    norm weights perturbed (so every norm, and Gemma's 1 + w, matters) and the head scaled up,
    so the random model has real preferences to keep."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(seed)
    shape = dict(shape)
    config = AutoConfig.for_model(**shape)
    # Gemma 2's soft-capped attention scores are eager attention's only
    attention = "eager" if shape["model_type"] == "gemma2" else "sdpa"
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=attention)
    if sharpen:
        with torch.no_grad():
            for name, param in model.named_parameters():
                if "norm" in name:
                    param.add_(0.2 * torch.randn_like(param))
            if not getattr(config, "tie_word_embeddings", False):
                model.get_output_embeddings().weight.mul_(4.0)
    return model.eval()


def check_families(names, device: str, smoke: bool, new_tokens: int, save) -> dict:
    """Per family and dtype: tokenswift against ar (plain decoding), tree rows against one-token
    passes; a family that cannot be built or run is reported with its error, and the rest go
    on."""
    import torch

    out: dict = {}
    for name in names:
        for dtype in (torch.bfloat16, torch.float16):
            key = f"{name}/{str(dtype).removeprefix('torch.')}"
            started = time.perf_counter()
            model = None
            try:
                model = build(family_shape(name, smoke), device, dtype, sharpen=True)
                prompt = SMOKE_FAMILY_PROMPT if smoke else FAMILY_PROMPT
                row = check_exactness(model, prompt, new_tokens)
                row["tokenswift_equals_ar"] = row.pop("tokenswift_equals_plain")
            except Exception as exc:  # noqa: BLE001 - one family's failure is its result
                row = {"error": f"{type(exc).__name__}: {exc}"[:400]}
            row["seconds"] = round(time.perf_counter() - started, 1)
            out[key] = row
            save()
            del model
            if device == "cuda":
                torch.cuda.empty_cache()
    return out


def family_exact(row: dict) -> bool:
    return "error" not in row and row["tokenswift_equals_ar"] and row["tree_rows_differing"] == 0


def check_exactness(model, prompt_len: int, new_tokens: int) -> dict:
    """Tree rows equal one-token passes bit for bit; greedy tokenswift equals plain decoding."""
    import torch
    from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
    from swiftwriter.engine.decoding.trie import Trie
    from swiftwriter.engine.passes import ModelRunner

    rng = random.Random(1)
    vocab = model.config.vocab_size
    prefix = [rng.randrange(2, vocab) for _ in range(prompt_len)]
    parents = [-1, 0, 0, 1, 1, 2, 3, 3]
    tokens = [prefix[-1]] + [rng.randrange(2, vocab) for _ in parents[1:]]
    depths = [0]
    for p in parents[1:]:
        depths.append(depths[p] + 1)
    children = [{} for _ in tokens]
    for i, p in enumerate(parents[1:], start=1):
        children[p][tokens[i]] = i
    n = len(tokens)
    trie = Trie(tokens, parents, depths, [()] * n, [0] * n, [1.0] * n, children)
    with torch.inference_mode():
        runner = ModelRunner(model)
        runner.prefill(prefix[:-1])
        runner.forward_trie(trie)
        tree = [runner.logits_at(i, trie).clone() for i in range(n)]
        bad = 0
        for node in range(n):
            path = []
            walk = node
            while walk > 0:
                path.append(tokens[walk])
                walk = parents[walk]
            plain = ModelRunner(model)
            plain.prefill(prefix[:-1])
            for token in [prefix[-1], *reversed(path)]:
                plain.forward_trie(Trie([token], [-1], [0], [()], [0], [1.0], [{}]))
                logits = plain.logits_at(0)
                plain.compact([0])
            bad += not torch.equal(tree[node], logits)
    sampling = SamplingSettings(greedy=True, penalty=1.2, window=256)
    prompt = [rng.randrange(2, vocab) for _ in range(16)] * (prompt_len // 16 + 1)

    def run(drafting, settings=sampling):
        gen = Generator(model, settings, drafting, calibrate=False)
        return [t for ev in gen.generate(prompt, new_tokens) for t in ev.tokens], gen.stats

    drafts = DraftSettings(sources=("ngram", "suffix"), adaptive=False)
    plain_out, _ = run(DraftSettings.plain())
    ours, stats = run(drafts)
    sampled = SamplingSettings(greedy=False, penalty=1.2, window=256, min_p=0.1, seed=5)
    return {
        "invariant": runner.invariant,
        "tree_rows_differing": bad,
        "tree_rows": n,
        "tokenswift_equals_plain": ours == plain_out,
        "accepted_drafts": stats.accepted_drafts,
        # the same seed draws the same text: sampled speculation is plain sampling's text
        "sampled_equals_plain": run(drafts, sampled)[0] == run(DraftSettings.plain(), sampled)[0],
    }


def verify_curve(model, contexts, ks) -> dict:
    from swiftwriter.bench.verifycost import our_costs, stock_costs

    out = {}
    for context in contexts:
        ours = our_costs(model, context, ks=ks, reps=3)
        stock = stock_costs(model, context, ks=ks, reps=3)
        out[str(context)] = {
            "ours_ms": {str(k): round(1000 * v, 3) for k, v in ours.items()},
            "stock_ms": {str(k): round(1000 * v, 3) for k, v in stock.items()},
        }
    return out


def host_overhead(model, nodes: int, new_tokens: int) -> dict:
    """Model time against everything else per step, with `nodes` draft nodes per pass."""
    from swiftwriter.engine import DraftSettings, Generator, SamplingSettings

    rng = random.Random(2)
    prompt = [rng.randrange(2, model.config.vocab_size) for _ in range(32)] * 8
    drafting = (
        DraftSettings.plain()
        if nodes <= 1
        else DraftSettings(sources=("ngram", "suffix"), max_nodes=nodes, adaptive=False)
    )
    gen = Generator(
        model, SamplingSettings(greedy=True, penalty=1.2), drafting, calibrate=False,
        sync_timing=True,
    )  # fmt: skip
    for _ in gen.generate(prompt, new_tokens):
        pass
    stats = gen.stats.as_dict()
    keys = ("model_ms_per_step", "host_ms_per_step", "tau", "forward_passes", "tokens_per_s")
    return {k: stats[k] for k in keys}


def long_run(model, new_tokens: int) -> dict:
    from swiftwriter.bench.methods import run_method
    from swiftwriter.engine import DraftSettings, SamplingSettings

    rng = random.Random(3)
    prompt = [rng.randrange(2, model.config.vocab_size) for _ in range(400)]
    sampling = SamplingSettings(greedy=True, penalty=1.2, window=1024)
    rows = {}
    for method in ("hf", "tokenswift"):
        drafting = DraftSettings(sources=("ngram", "suffix"))
        res = run_method(method, model, prompt, new_tokens, sampling, drafting)
        rows[method] = {
            "tokens": len(res.tokens),
            "seconds": round(res.seconds, 3),
            "tokens_per_s": round(len(res.tokens) / res.seconds, 2),
            "forward_passes": res.forward_passes,
        }
        rows[method]["output"] = res.tokens
    same = rows["hf"].pop("output") == rows["tokenswift"].pop("output")
    rows["identical"] = same
    rows["speedup"] = round(rows["hf"]["seconds"] / rows["tokenswift"]["seconds"], 3)
    rows["note"] = "random weights: the text is repetitive and tau is not representative"
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu-check")
    parser.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU (tests)")
    parser.add_argument("--long-tokens", type=int, default=20000)
    parser.add_argument(
        "--families",
        default="all",
        help=f"families to check (comma list of {', '.join(FAMILIES)}; all; none)",
    )
    args = parser.parse_args(argv)
    families = _families(args.families)
    import torch

    smoke = args.smoke
    if not smoke and not torch.cuda.is_available():
        print("gpu-check: no CUDA device is visible to torch; nothing was measured "
              "(run with --smoke for the CPU rehearsal)", file=sys.stderr)  # fmt: skip
        return 2
    device = "cpu" if smoke else "cuda"
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict = {"device": torch.cuda.get_device_name(0) if not smoke else "cpu (smoke)",
                    "torch": torch.__version__, "smoke": smoke}  # fmt: skip
    t0 = time.perf_counter()

    def save() -> None:  # after every part: a run cut short still leaves what it measured
        report["seconds"] = round(time.perf_counter() - t0, 1)
        (out_dir / "gpu-check.json").write_text(json.dumps(report, indent=1))

    big = TINY if smoke else LLAMA_8B
    mid = TINY if smoke else QWEN_1_5B
    report["exactness"] = {}
    for name, shape in (("tiny", TINY), ("qwen-1.5b-shaped", mid)):
        for dtype in (torch.bfloat16, torch.float16):
            model = build(shape, device, dtype)
            key = f"{name}/{str(dtype).removeprefix('torch.')}"
            report["exactness"][key] = check_exactness(model, 300, 40 if smoke else 300)
            save()
            del model
    report["families"] = check_families(families, device, smoke, 24 if smoke else 128, save)
    save()
    model = build(big, device, torch.bfloat16)
    contexts = (64, 256) if smoke else (4096, 32768, 100000)
    report["verify_ms"] = verify_curve(model, contexts, (1, 4, 16) if smoke else (1, 4, 16, 32))
    save()
    del model
    model = build(mid, device, torch.bfloat16)
    report["host_overhead"] = {
        str(k): host_overhead(model, k, 24 if smoke else 512) for k in (1, 16)
    }
    save()
    report["long_run"] = long_run(model, 64 if smoke else args.long_tokens)
    save()
    summary = format_report(report)
    (out_dir / "gpu-check.txt").write_text(summary)
    print(summary)
    exact = all(
        r["tree_rows_differing"] == 0 and r["tokenswift_equals_plain"] and r["sampled_equals_plain"]
        for r in report["exactness"].values()
    )
    return 0 if exact and all(map(family_exact, report["families"].values())) else 1


def _families(text: str) -> list[str]:
    if text == "all":
        return list(FAMILIES)
    if text == "none":
        return []
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise SystemExit(
            f"gpu-check: unknown families {', '.join(unknown)} ({', '.join(FAMILIES)})"
        )
    return names


def format_report(report: dict) -> str:
    lines = [f"gpu-check on {report['device']} (torch {report['torch']}), {report['seconds']} s"]
    for key, r in report["exactness"].items():
        lines.append(
            f"exactness {key}: tree rows differing {r['tree_rows_differing']}/{r['tree_rows']}, "
            f"tokenswift = plain: {r['tokenswift_equals_plain']} "
            f"({r['accepted_drafts']} drafts accepted), sampled: {r['sampled_equals_plain']}"
        )
    for key, r in report.get("families", {}).items():
        if "error" in r:
            lines.append(f"family {key}: could not run: {r['error']}")
            continue
        lines.append(
            f"family {key}: tokenswift = ar: {r['tokenswift_equals_ar']} "
            f"({r['accepted_drafts']} drafts accepted), tree rows differing "
            f"{r['tree_rows_differing']}/{r['tree_rows']}, sampled: {r['sampled_equals_plain']}, "
            f"invariant passes: {r['invariant']} ({r['seconds']} s)"
        )
    for context, curve in report["verify_ms"].items():
        ours = " / ".join(f"{v}" for v in curve["ours_ms"].values())
        stock = " / ".join(f"{v}" for v in curve["stock_ms"].values())
        ks = "/".join(curve["ours_ms"])
        lines.append(f"verify k={ks} at {context} cached: ours {ours} ms, stock {stock} ms")
    for k, r in report["host_overhead"].items():
        lines.append(
            f"per step with {k} tree tokens: model {r['model_ms_per_step']} ms, host "
            f"{r['host_ms_per_step']} ms (tau {r['tau']})"
        )
    long = report["long_run"]
    lines.append(
        f"long run: hf {long['hf']['tokens_per_s']} tok/s, tokenswift "
        f"{long['tokenswift']['tokens_per_s']} tok/s ({long['speedup']}x, identical: "
        f"{long['identical']}; {long['note']})"
    )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

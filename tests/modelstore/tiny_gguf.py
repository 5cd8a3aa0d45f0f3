"""A tiny llama GGUF written in the test (gguf.GGUFWriter), the way llama.cpp's converter lays
one out: GGUF tensor names, q/k rows permuted for its rotary layout, a byte-level BPE tokenizer
with a chat template. No hub, no network."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from swiftwriter.bench.ggufgen import permute_rows

CHAT = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
MERGES = ["h e", "t h"]  # a few merges: transformers builds the BPE from them
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TOKENS = 256 + len(MERGES) + len(SPECIAL)


def _byte_tokens() -> list[str]:
    """GPT-2's printable stand-ins for the 256 bytes (byte-level BPE's base vocabulary)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = list(keep), 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    table = dict(zip(keep, chars, strict=True))
    return [chr(table[b]) for b in range(256)]


def tiny_model(seed: int = 7, context: int = 2048):
    """A tiny random llama whose vocabulary is the tokenizer's (256 bytes, merges, specials)."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(
        vocab_size=TOKENS, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=context, bos_token_id=TOKENS - 3, eos_token_id=TOKENS - 1,
        tie_word_embeddings=False, rms_norm_eps=1e-5, rope_theta=10000.0,
    )  # fmt: skip
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)  # real preferences: generated text is not a tie-break
    return model.eval()


def write_gguf(path: Path, model=None, arch: str = "llama", qtype: str = "F32") -> Path:
    """Write `model` (default: tiny_model()) as a GGUF at `path`, tensors in `qtype` (F32, F16,
    BF16, Q8_0, or I8 which transformers cannot read; norms stay F32 as llama.cpp keeps
    them)."""
    import gguf

    model = model if model is not None else tiny_model()
    config = model.config
    n_head, n_kv = config.num_attention_heads, config.num_key_value_heads
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name("tiny-test-llama")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_kv)
    writer.add_rope_dimension_count(config.hidden_size // n_head)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(_byte_tokens() + [m.replace(" ", "") for m in MERGES] + SPECIAL)
    writer.add_token_types([1] * (256 + len(MERGES)) + [3] * len(SPECIAL))
    writer.add_token_merges(MERGES)
    writer.add_bos_token_id(config.bos_token_id)
    writer.add_eos_token_id(config.eos_token_id)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)
    quant = gguf.GGMLQuantizationType[qtype if qtype != "I8" else "F32"]
    for hf_name, tensor in model.state_dict().items():
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        data = tensor.detach().float().numpy()
        if name.endswith("attn_q.weight"):
            data = permute_rows(data, n_head)
        elif name.endswith("attn_k.weight"):
            data = permute_rows(data, n_kv)
        kind = quant if data.ndim == 2 else gguf.GGMLQuantizationType.F32
        if qtype == "I8" and data.ndim == 2:  # a type transformers cannot de-quantise
            writer.add_tensor(name, data.astype(np.int8))
        elif kind == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(name, data)
        elif kind == gguf.GGMLQuantizationType.F16:
            writer.add_tensor(name, data.astype(np.float16))
        else:
            packed = gguf.quants.quantize(data, kind)
            writer.add_tensor(name, packed, raw_shape=packed.shape, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path

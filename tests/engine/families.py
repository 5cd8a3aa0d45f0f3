"""Tiny random-weight models of the decoder families writers use, built from their
transformers configs (two layers, hidden 64, 256 token ids), for the families' exactness tests."""

from __future__ import annotations

import torch

# name -> (config class name, extra config fields)
FAMILIES = {
    "llama": ("LlamaConfig", {}),
    "mistral": ("MistralConfig", {"sliding_window": None}),
    "mistral-window": ("MistralConfig", {"sliding_window": 8}),
    "qwen2": ("Qwen2Config", {}),
    "qwen3": ("Qwen3Config", {"head_dim": 16}),
    "qwen3-window": (
        "Qwen3Config",
        {"head_dim": 16, "use_sliding_window": True, "sliding_window": 8, "max_window_layers": 1},
    ),
    "gemma2": (
        "Gemma2Config",
        {
            "head_dim": 16,
            "query_pre_attn_scalar": 24,
            "sliding_window": 8,
            "attn_logit_softcapping": 5.0,
            "final_logit_softcapping": 3.0,
            "hidden_activation": "gelu_pytorch_tanh",
            "tie_word_embeddings": True,
        },
    ),
    "gemma3": (
        "Gemma3TextConfig",
        {
            "head_dim": 16,
            "query_pre_attn_scalar": 16,
            "sliding_window": 8,
            "layer_types": ["sliding_attention", "full_attention"],
            "hidden_activation": "gelu_pytorch_tanh",
            "tie_word_embeddings": True,
        },
    ),
    "phi3": ("Phi3Config", {"partial_rotary_factor": 0.5}),
    # Phi-3.5 / Phi-4-mini: longrope, its long factors from position 16 on here
    "phi3-longrope": (
        "Phi3Config",
        {
            "rope_parameters": {
                "rope_type": "longrope",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5,
                "original_max_position_embeddings": 16,
                "short_factor": [1.0, 1.1, 1.3, 1.6],
                "long_factor": [1.0, 2.0, 4.0, 8.0],
            },
            "original_max_position_embeddings": 16,
        },
    ),
    "olmo2": ("Olmo2Config", {}),
    "granite": (
        "GraniteConfig",
        {
            "embedding_multiplier": 6.0,
            "residual_multiplier": 0.5,
            "attention_multiplier": 0.2,
            "logits_scaling": 0.5,
        },
    ),
}


def build_family(name: str, seed: int = 0, vocab: int = 256, max_positions: int = 1024):
    """A tiny random model of family `name` in float32: norms and embeddings perturbed so every
    part of the layer matters, logits sharp enough for real preferences."""
    import transformers
    from transformers import AutoModelForCausalLM

    cls_name, extra = FAMILIES[name]
    fields = dict(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=None,
        tie_word_embeddings=False,
    )
    fields.update(extra)  # Gemma ties its head to the embedding, as the real ones do
    config = getattr(transformers, cls_name)(**fields)
    config._attn_implementation = "eager" if name == "gemma2" else "sdpa"
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for module_name, param in model.named_parameters():
            if "norm" in module_name:
                param.add_(0.2 * torch.randn_like(param))
        model.get_output_embeddings().weight.mul_(8.0 if name != "granite" else 2.0)
    model.eval()
    return model

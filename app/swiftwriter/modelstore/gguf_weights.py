"""A model built straight from a GGUF file: its Linear layers and embedding computing from the
file's own blocks where the kernel runs their type (engine/passes/quant.py), the rest (norms,
biases, types the kernel does not run) read as float.

Why not transformers' GGUF loading: it de-quantizes every weight into a float copy (3-4x the
file's memory, and the speed of a float model), and refuses to save what it loaded. Here the
model skeleton comes from the config without memory for its weights, each tensor is read from
the file on its own (no mapping of the whole file stays resident), and what the kernel runs is
packed from those bytes, so the process holds about the file's size.

transformers' own name map and tensor processors place each tensor: where a processor only
reorders a weight's rows (llama's q/k rotary layout), the same reordering is applied to the
blocks, which are rows; a processor that does anything else gets de-quantized values."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from swiftwriter.modelstore import gguf_header

log = logging.getLogger(__name__)

STORED = "stored"  # the precision name of a model computing from the file's blocks


@dataclass
class Built:
    """What was built: the model, and what was not kept as stored (type, count) with why."""

    model: object
    stored: dict[str, int] = field(default_factory=dict)  # type name -> tensors kept as blocks
    dequantized: dict[str, int] = field(default_factory=dict)  # type name -> tensors made float
    dequantized_bytes: int = 0

    def note(self) -> str:
        """One line for the writer when some weights could not stay as stored (else "")."""
        if not self.dequantized:
            return ""
        kinds = ", ".join(f"{k} x{n}" for k, n in sorted(self.dequantized.items()))
        mib = self.dequantized_bytes / (1 << 20)
        return f"weights the kernel cannot run as stored were de-quantized once ({kinds}; {mib:.0f} MiB)"


def _read(handle, tensor) -> np.ndarray:
    """One tensor's bytes from the file (never a mapping of the whole file)."""
    handle.seek(tensor.start)
    raw = np.empty(tensor.size, dtype=np.uint8)
    if handle.readinto(memoryview(raw)) != raw.size:
        raise ValueError(f"{tensor.name}: the file ends inside its data")
    return raw


def _row_order(processor, name: str, rows: int):
    """The processor's effect on a weight's rows: None when it leaves them alone, the new
    order when it only reorders them, or False when it does anything else."""
    probe = np.arange(rows, dtype=np.float64).reshape(rows, 1)
    try:
        out = np.asarray(processor.process(weights=probe, name=name).weights)
    except Exception:  # noqa: BLE001 - a processor that cannot take the probe: de-quantize
        return False
    if out.shape != (rows, 1):
        return False
    order = out[:, 0]
    if not np.array_equal(np.sort(order), probe[:, 0]):
        return False
    order = order.astype(np.int64)
    return None if np.array_equal(order, np.arange(rows)) else order


def _dequantized(processor, tensor, raw: np.ndarray, name: str) -> np.ndarray:
    """The tensor's values as float32 numpy, as gguf de-quantizes them (the kernel's own
    de-quantization, equal bit for bit and far faster, for the types it runs)."""
    from gguf import GGMLQuantizationType, dequantize  # lazy: gguf

    from swiftwriter.engine.passes import (  # lazy: pulls in torch, transformers
        QUANT_TYPES,
        QuantWeight,
        quant_available,
    )

    shape = tuple(reversed(tensor.shape))
    if tensor.type_id in QUANT_TYPES.values() and len(shape) == 2 and quant_available():
        blocks = raw.reshape(shape[0], -1)
        values = QuantWeight.from_blocks(blocks, tensor.type_id, shape[1]).dense().numpy()
    else:
        kind = GGMLQuantizationType(tensor.type_id)
        values = dequantize(raw.view(_NUMPY.get(tensor.kind, np.uint8)), kind).reshape(shape)
    return np.asarray(processor.process(weights=values, name=name).weights)


_NUMPY = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}  # as gguf's reader views them


def _names(model, arch: str, layers: int) -> dict[str, str]:
    """{GGUF tensor name: the model's parameter name}, from gguf's own name table (what
    transformers' map computes, in one pass instead of one per submodule)."""
    from gguf import MODEL_ARCH_NAMES, get_tensor_name_map  # lazy: gguf

    found = [key for key, value in MODEL_ARCH_NAMES.items() if value == arch]
    if not found:
        raise ValueError(f"gguf knows no architecture '{arch}'")
    table = get_tensor_name_map(found[0], layers)
    out = {}
    for name, _ in model.named_parameters():
        base, _, suffix = name.rpartition(".")
        gguf_name = table.get_name(base)
        if gguf_name is not None:
            out[f"{gguf_name}.{suffix}"] = name
    return out


def _module_at(model, dotted: str):
    module = model
    for part in dotted.split("."):
        module = getattr(module, part)
    return module


def _set_module(model, dotted: str, new) -> None:
    parent, _, leaf = dotted.rpartition(".")
    setattr(_module_at(model, parent) if parent else model, leaf, new)


def build(config, gguf_path: Path, dtype, keep_stored: bool = True) -> Built:
    """The model of `config` with `gguf_path`'s weights; activations, norms and biases in
    `dtype`. `keep_stored`: Linear layers and the embedding of a type the kernel runs keep
    their blocks (else every weight is de-quantized into `dtype`)."""
    from accelerate import init_empty_weights  # lazy: accelerate
    from transformers import AutoModelForCausalLM  # lazy: transformers
    from transformers.modeling_gguf_pytorch_utils import (  # lazy: transformers
        TENSOR_PROCESSORS,
        TensorProcessor,
    )

    from swiftwriter.engine.passes import (  # lazy: pulls in torch, transformers
        QuantEmbedding,
        quant_available,
    )

    keep_stored = keep_stored and quant_available()

    header = gguf_header.read(Path(gguf_path))  # bounded: a hostile header is refused here
    arch = str(header.values.get("general.architecture", ""))
    with init_empty_weights(include_buffers=False):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    processor = TENSOR_PROCESSORS.get(arch, TensorProcessor)(config=config.to_dict())
    names = _names(model, arch, config.num_hidden_layers)
    built = Built(model)
    stored_embedding = None
    with open(gguf_path, "rb") as handle:
        for tensor in header.tensors:
            hf_name = names.get(tensor.name)
            if hf_name is None:
                continue
            raw = _read(handle, tensor)
            stored = (
                _keep_blocks(built, processor, tensor, raw, hf_name, dtype) if keep_stored else None
            )
            if stored is None:
                _dequantize_into(built, processor, tensor, raw, hf_name, dtype)
            elif isinstance(stored, QuantEmbedding):
                stored_embedding = stored
    _tie_head(model, config, stored_embedding)
    missing = [n for n, p in model.named_parameters() if p.is_meta]
    if missing:
        raise ValueError(f"the file has no weights for {', '.join(missing[:4])}")
    model.eval()
    return built


def _keep_blocks(built: Built, processor, tensor, raw, hf_name: str, dtype):
    """A Linear layer's or the embedding's weight kept in its blocks, where the kernel runs its
    type and its rows can be put in transformers' order: the module set in its place, or None."""
    from torch import nn  # lazy: torch

    from swiftwriter.engine.passes import (  # lazy: pulls in torch, transformers
        QUANT_TYPES,
        QuantEmbedding,
        QuantLinear,
        QuantWeight,
    )

    model = built.model
    path, _, kind = hf_name.rpartition(".")
    module = _module_at(model, path)
    if kind != "weight" or tensor.type_id not in QUANT_TYPES.values():
        return None
    if not isinstance(module, (nn.Linear, nn.Embedding)):
        return None
    k = int(tensor.shape[0])  # GGML's order: the innermost dimension first
    rows = int(np.prod(tensor.shape[1:])) if len(tensor.shape) > 1 else 1
    order = _row_order(processor, tensor.name, rows)
    if order is False:
        return None
    blocks = raw.reshape(rows, -1)
    if order is not None:
        blocks = blocks[order]
    weight = QuantWeight.from_blocks(blocks, tensor.type_id, k)
    if isinstance(module, nn.Embedding):
        stored = QuantEmbedding(weight, dtype)
    else:
        bias = module.bias if module.bias is not None else None
        bias = None if bias is None or bias.is_meta else bias.detach()
        stored = QuantLinear(weight, bias)
    _set_module(model, path, stored)
    built.stored[tensor.kind] = built.stored.get(tensor.kind, 0) + 1
    return stored


def _dequantize_into(built: Built, processor, tensor, raw, hf_name: str, dtype) -> None:
    """The tensor's values in `dtype` in the model's parameter (a quantized matrix counted)."""
    import torch  # lazy: torch

    values = torch.from_numpy(
        np.ascontiguousarray(_dequantized(processor, tensor, raw, tensor.name))
    )
    if values.dim() == 2 and tensor.type_id not in (0, 1, 30):  # not F32/F16/BF16
        built.dequantized[tensor.kind] = built.dequantized.get(tensor.kind, 0) + 1
        built.dequantized_bytes += values.numel() * torch.finfo(dtype).bits // 8
    _assign(built.model, hf_name, values.to(dtype))


def _assign(model, hf_name: str, values) -> None:
    from torch import nn  # lazy: torch

    path, _, kind = hf_name.rpartition(".")
    module = _module_at(model, path)
    current = getattr(module, kind)
    if current is not None and tuple(current.shape) != tuple(values.shape):
        raise ValueError(f"{hf_name}: the file's shape {tuple(values.shape)}, the model's "
                         f"{tuple(current.shape)}")  # fmt: skip
    setattr(module, kind, nn.Parameter(values, requires_grad=False))


def _tie_head(model, config, stored_embedding) -> None:
    """A model whose output head is its embedding (no output tensor in the file) reads the
    same blocks, or the same float tensor."""
    from torch import nn  # lazy: torch

    if not getattr(config, "tie_word_embeddings", False):
        return
    head = model.get_output_embeddings()
    if head is None or not isinstance(head, nn.Linear) or not head.weight.is_meta:
        return
    if stored_embedding is not None:
        model.set_output_embeddings(stored_embedding.head())
    else:
        head.weight = model.get_input_embeddings().weight

"""What a GGUF file holds, read from its header before anything is converted: architecture,
parameter count, tensor types, context length and chat template, and one line naming why a
file is refused (not GGUF, truncated or damaged, past a budget, an architecture or
quantisation transformers cannot read). The header is read by our own bounded scan
(gguf_header), never by the `gguf` package's reader, and no weights are read, so this is quick,
small and needs no torch."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from swiftwriter.errors import UserError
from swiftwriter.modelstore import gguf_header

BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# The `gguf` reader's numpy views of one metadata element (0.7 kB; a string's 1.4 kB), with
# the tokenizer transformers builds from them: measured on gguf 0.19.
READER_BYTES_PER_ELEMENT = 2048
# Names llama.cpp gives architectures that transformers knows under another (its GGUF loader
# renames them the same way).
RENAMED = {"qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe", "gpt-oss": "gpt_oss",
           "minimax-m2": "minimax_m2"}  # fmt: skip


@dataclass(frozen=True)
class GgufInfo:
    path: Path
    size: int  # bytes on disk
    architecture: str
    parameters: int
    types: dict[str, int]  # tensor type -> how many tensors
    context_length: int | None
    chat_template: str | None
    metadata_elements: int = 0  # in all its metadata arrays

    def memory(self, dtype: str) -> int:
        """Bytes the weights take once loaded in `dtype` (parameters x bytes per value)."""
        return self.parameters * BYTES.get(dtype, 4)

    def conversion_memory(self) -> int:
        """What converting takes at least: the weights de-quantised to float32 twice (as read,
        and the model saved from them) and the `gguf` reader's views of the metadata."""
        return 2 * self.memory("float32") + self.metadata_elements * READER_BYTES_PER_ELEMENT

    def describe(self) -> str:
        kinds = ", ".join(f"{n} {t}" for t, n in sorted(self.types.items(), key=lambda x: -x[1]))
        return (
            f"{self.path.name}: {self.architecture}, {self.parameters / 1e6:,.1f}M parameters, "
            f"{size(self.size)} on disk ({kinds} tensors)"
        )


def size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.{0 if n >= 100 * scale else 1}f} {unit}"
    return f"{n} bytes"


def readable_types() -> set[str]:
    """Tensor types the `gguf` package de-quantises, which is what transformers reads with."""
    from gguf.quants import _type_traits  # lazy: gguf

    return {"F32", "F16"} | {kind.name for kind in _type_traits}


def supported_architectures() -> set[str]:
    from transformers.modeling_gguf_pytorch_utils import (  # lazy: transformers
        GGUF_SUPPORTED_ARCHITECTURES,
    )

    return set(GGUF_SUPPORTED_ARCHITECTURES)


def inspect(path: Path) -> GgufInfo:
    """Read `path`'s header and tensor table within their budget (gguf_header), or raise a
    UserError naming why it is refused."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise UserError(f"{path} is not a file")
    try:
        header = gguf_header.read(path)
        total = path.stat().st_size
    except OSError as exc:
        raise UserError(f"Cannot read {path}: {exc.strerror or exc}") from exc
    if not header.tensors:
        raise UserError(f"{path.name} holds no tensors")
    architecture = header.values.get("general.architecture")
    if not architecture:
        raise UserError(f"{path.name} does not say its architecture (general.architecture)")
    known = supported_architectures()
    if architecture not in known and RENAMED.get(architecture) not in known:
        raise UserError(
            f"{path.name}: transformers cannot read the architecture '{architecture}' from GGUF"
        )
    vocabulary = _whole(header.values.get(f"{architecture}.vocab_size"))
    if vocabulary is not None and vocabulary > gguf_header.MAX_VOCABULARY:
        raise UserError(
            f"{path.name}: a vocabulary of {vocabulary:,} tokens ({architecture}.vocab_size), "
            f"more than the {gguf_header.MAX_VOCABULARY:,} allowed"
        )
    types: dict[str, int] = {}
    for tensor in header.tensors:
        types[tensor.kind] = types.get(tensor.kind, 0) + 1
    unreadable = sorted(set(types) - readable_types())
    if unreadable:
        raise UserError(
            f"{path.name}: transformers cannot de-quantise its {', '.join(unreadable)} tensors"
        )
    context = _whole(header.values.get(f"{architecture}.context_length"))
    template = header.values.get("tokenizer.chat_template")
    return GgufInfo(
        path=path.resolve(),
        size=total,
        architecture=architecture,
        parameters=sum(t.elements for t in header.tensors),
        types=types,
        context_length=context if context else None,
        chat_template=template or None,
        metadata_elements=header.elements,
    )


def _whole(value: object) -> int | None:
    """A whole number from the header (a bool is not one)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None

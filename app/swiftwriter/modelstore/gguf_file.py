"""What a GGUF file holds, read from its header before anything is converted: architecture,
parameter count, tensor types, context length and chat template, and one line naming why a
file is refused (not GGUF, truncated or damaged, an architecture or quantisation transformers
cannot read). The `gguf` reader maps the file and reads no weights, so this is quick and needs
no torch."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from swiftwriter.errors import UserError

MAGIC = b"GGUF"
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
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

    def memory(self, dtype: str) -> int:
        """Bytes the weights take once loaded in `dtype` (parameters x bytes per value)."""
        return self.parameters * BYTES.get(dtype, 4)

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
    from gguf.quants import _type_traits

    return {"F32", "F16"} | {kind.name for kind in _type_traits}


def supported_architectures() -> set[str]:
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return set(GGUF_SUPPORTED_ARCHITECTURES)


def _field(reader, key: str):
    field = reader.fields.get(key)
    if field is None:
        return None
    try:
        return field.contents()
    except (ValueError, IndexError, TypeError, UnicodeDecodeError):
        return None


def inspect(path: Path) -> GgufInfo:
    """Read `path`'s header and tensor table, or raise a UserError naming why it is refused."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise UserError(f"{path} is not a file")
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
        total = path.stat().st_size
    except OSError as exc:
        raise UserError(f"Cannot read {path}: {exc.strerror or exc}") from exc
    if magic != MAGIC:
        raise UserError(f"{path.name} is not a GGUF file (it does not start with 'GGUF')")
    import gguf

    try:
        reader = gguf.GGUFReader(path)
        end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    except Exception as exc:  # noqa: BLE001 - the reader's errors are all "cannot parse"
        raise UserError(f"{path.name} is truncated or damaged: {exc}") from exc
    if end > total or not reader.tensors:
        raise UserError(
            f"{path.name} is truncated: its tensors end at byte {end}, the file at {total}"
        )
    architecture = str(_field(reader, "general.architecture") or "")
    if not architecture:
        raise UserError(f"{path.name} does not say its architecture (general.architecture)")
    known = supported_architectures()
    if architecture not in known and RENAMED.get(architecture) not in known:
        raise UserError(
            f"{path.name}: transformers cannot read the architecture '{architecture}' from GGUF"
        )
    types: dict[str, int] = {}
    for tensor in reader.tensors:
        name = tensor.tensor_type.name
        types[name] = types.get(name, 0) + 1
    unreadable = sorted(set(types) - readable_types())
    if unreadable:
        raise UserError(
            f"{path.name}: transformers cannot de-quantise its {', '.join(unreadable)} tensors"
        )
    context = _field(reader, f"{architecture}.context_length")
    template = _field(reader, "tokenizer.chat_template")
    return GgufInfo(
        path=path.resolve(),
        size=total,
        architecture=architecture,
        parameters=sum(int(t.n_elements) for t in reader.tensors),
        types=types,
        context_length=int(context) if isinstance(context, int) and context > 0 else None,
        chat_template=template if isinstance(template, str) and template else None,
    )

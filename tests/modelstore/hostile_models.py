"""Hostile GGUF files and model folders, written byte by byte or patched after the `gguf`
writer (which would refuse them): a metadata array that declares more than the file holds, a
vocabulary past any real one, tensors laid over each other, a non-UTF-8 architecture, and a
model folder whose config.json declares a model far larger than its weights. Not a test
module."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from tests.modelstore.tiny_gguf import write_gguf

STRING, ARRAY, UINT8, UINT32, F32 = 8, 9, 0, 4, 0  # GGUF value types; F32: a tensor type


def text(data: bytes, order: str = "<") -> bytes:
    """A GGUF string: its length (8 bytes) and its bytes."""
    return struct.pack(order + "Q", len(data)) + data


def string_kv(key: bytes, value: bytes, order: str = "<") -> bytes:
    return text(key, order) + struct.pack(order + "I", STRING) + text(value, order)


def array_kv(key: bytes, inner: int, length: int, payload: bytes = b"") -> bytes:
    return text(key) + struct.pack("<IIQ", ARRAY, inner, length) + payload


def tensor(name: bytes, dims: tuple, kind: int = F32, offset: int = 0, order: str = "<") -> bytes:
    """One tensor info: name, dimension count, dimensions, type and offset."""
    return (text(name, order) + struct.pack(f"{order}I{len(dims)}Q", len(dims), *dims)
            + struct.pack(order + "IQ", kind, offset))  # fmt: skip


def gguf_bytes(kvs=(), tensors=(), data: bytes = b"", version: int = 3, order: str = "<") -> bytes:
    """A whole file: magic, `version`, the counts, `kvs`, `tensors`, and with tensors padding
    to 32 bytes and `data` (their bytes)."""
    head = b"GGUF" + struct.pack(order + "IQQ", version, len(tensors), len(kvs))
    head += b"".join(kvs) + b"".join(tensors)
    return head + bytes(-len(head) % 32 if tensors else 0) + data


def header(*kvs: bytes) -> bytes:
    """Magic, version 3, no tensors and the metadata `kvs`."""
    return gguf_bytes(kvs)


LLAMA = string_kv(b"general.architecture", b"llama")


def declared_array(path: Path, length: int, payload: bytes = b"") -> Path:
    """A llama header with a uint8 array that declares `length` elements, then `payload`."""
    path.write_bytes(header(LLAMA, array_kv(b"junk", UINT8, length, payload)))
    return path


def vocabulary(path: Path, tokens: int, width: int = 12) -> Path:
    """A llama header whose tokenizer.ggml.tokens holds `tokens` real tokens of `width` bytes."""
    rows = np.zeros(tokens, dtype=[("length", "<u8"), ("text", f"S{width}")])
    rows["length"], rows["text"] = width, b"t" * width
    kv = array_kv(b"tokenizer.ggml.tokens", STRING, tokens)
    with path.open("wb") as fh:
        fh.write(header(LLAMA, kv))
        fh.write(rows.tobytes())
    return path


def overlapping(path: Path, model=None) -> Path:
    """A tiny llama GGUF whose tensors all start at the data section's first byte."""
    import gguf

    write_gguf(path, model)
    reader = gguf.GGUFReader(path, "r+")
    for tensor in reader.tensors:
        tensor.field.parts[5][0] = 0  # the tensor's offset
    reader.data.flush()
    del reader
    return path


def non_utf8_architecture(path: Path, model=None) -> Path:
    """A tiny llama GGUF whose general.architecture is 'll\\xffma' (not UTF-8)."""
    write_gguf(path, model)
    data = path.read_bytes()
    stated = string_kv(b"general.architecture", b"llama")
    assert data.count(stated) == 1
    path.write_bytes(data.replace(stated, string_kv(b"general.architecture", b"ll\xffma")))
    return path


# Llama 3 405B's shape with a 128,000-token vocabulary: about 400 billion parameters.
HUGE = {"hidden_size": 16384, "num_hidden_layers": 48, "vocab_size": 128000,
        "intermediate_size": 53248, "num_attention_heads": 128, "num_key_value_heads": 8}  # fmt: skip


def oversized_folder(folder: Path) -> Path:
    """A tiny llama folder (weights and a tokenizer) whose config.json declares HUGE."""
    from tests.commands.tiny_cli import word_tokenizer_folder
    from tests.conftest import build_tiny

    build_tiny("llama", seed=3).save_pretrained(folder)
    word_tokenizer_folder(folder)
    config = folder / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), **HUGE}))
    return folder

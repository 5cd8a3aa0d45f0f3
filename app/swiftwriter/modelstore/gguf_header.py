"""A GGUF file's header read within a budget, before any other reader sees the file.

The `gguf` package's reader (which transformers converts with) trusts every length the file
declares: a 97-byte file that declares a metadata array of 2^62 elements makes it loop, reading
past the end as empty arrays, until memory runs out. It also builds a numpy view per metadata
element, about 0.7 kB each (1.4 kB for a string, measured on gguf 0.19), so even a real array
of 20 million elements took over 6 GB. This scan walks the same layout with `struct` and checks
every length before it uses it: against the bytes left in the file, then against a cap no real
model comes near. Tensors must lie inside the file without overlapping. A file that passes
gives the `gguf` reader at most MAX_ELEMENTS metadata elements (under 1.5 GB there; Gemma 3's
vocabulary with its scores and types, 786,432 elements, costs over 1 GB anyway), and the scan
itself holds only the tensor table and the few values the app reads (a quarter of a second
for Gemma 3's header).

Layout (versions 2 and 3): 'GGUF', version u32, tensor count u64, metadata count u64; each
metadata entry a string key, a type u32 and a value (a scalar, a string: length u64 and bytes,
or an array: element type u32, count u64, elements); each tensor a string name, dimension count
u32, dimensions u64 each, type u32 and offset u64 from the data section, which starts at the
next multiple of the alignment (general.alignment, default 32)."""

from __future__ import annotations

import itertools
import math
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from swiftwriter.errors import UserError

MAX_VOCABULARY = 1 << 19  # tokens: twice the largest real vocabulary (Gemma 3's 262,144)
MAX_ARRAY = MAX_VOCABULARY  # elements in one metadata array (the vocabulary's are the longest)
MAX_ELEMENTS = 1 << 20  # in all arrays together (Gemma 3: 786,432 tokens, scores and types)
MAX_STRING = 16 << 20  # bytes of one string value (a chat template is tens of kB)
MAX_NAME = 1024  # bytes of a metadata key or a tensor name
MAX_KEYS = MAX_TENSORS = 1 << 16  # real models: tens of keys, at most a few thousand tensors
MAX_DIMS = 4  # ggml's own limit
KEPT_TEXT = ("general.architecture", "tokenizer.chat_template")  # the strings the app reads
VOCABULARY = "tokenizer.ggml.tokens"

STRING, ARRAY, UINT32 = 8, 9, 4
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
           12: "d"}  # fmt: skip


@dataclass(frozen=True)
class TensorInfo:
    name: str
    kind: str  # the ggml type's name (F32, Q8_0, ...)
    elements: int
    start: int  # byte offset in the file
    size: int  # bytes
    shape: tuple[int, ...] = ()  # ggml's order: the innermost (row) dimension first
    type_id: int = 0  # ggml's number for `kind`


@dataclass(frozen=True)
class Header:
    values: dict[str, object]  # every scalar, and the strings in KEPT_TEXT
    elements: int  # metadata array elements in all
    tensors: list[TensorInfo]


def read(path: Path) -> Header:
    """`path`'s header, or a UserError naming the file and the limit it breaks."""
    with path.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise UserError(f"{path.name} is not a GGUF file (it does not start with 'GGUF')")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _Scan(data, path.name).header()


class _Scan:
    """Reads the header front to back; every count and length is checked before it is used."""

    def __init__(self, data: mmap.mmap, name: str):
        self.data, self.name, self.at, self.order = data, name, 4, "<"

    def refuse(self, why: str) -> UserError:
        return UserError(f"{self.name}: {why}")

    def truncated(self) -> UserError:
        return UserError(f"{self.name} is truncated: its header ends past the file's end")

    def left(self) -> int:
        return len(self.data) - self.at

    def take(self, fmt: str) -> tuple:
        size = struct.calcsize(self.order + fmt)
        if size > self.left():
            raise self.truncated()
        values = struct.unpack_from(self.order + fmt, self.data, self.at)
        self.at += size
        return values

    def number(self, fmt: str):
        return self.take(fmt)[0]

    def count(self, what: str, count: int, item: int, cap: int, unit: str = "elements") -> int:
        """`count` items of at least `item` bytes: within the bytes left, then within `cap`."""
        if count * item > self.left():
            raise self.refuse(
                f"{what} declares {count:,} {unit}, more than the {self.left():,} bytes left "
                "in the file hold"
            )
        if count > cap:
            raise self.refuse(f"{what} holds {count:,} {unit}, more than the {cap:,} allowed")
        return count

    def skip(self, what: str, cap: int) -> int:
        """Past one string; where it started."""
        length = self.count(what, self.number("Q"), 1, cap, "bytes")
        self.at += length
        return self.at - length

    def text(self, what: str, cap: int) -> str:
        start = self.skip(what, cap)
        try:
            return self.data[start : self.at].decode("utf-8")
        except UnicodeDecodeError:
            raise self.refuse(f"{what} is not UTF-8 text") from None

    def strings(self, key: str, length: int) -> None:
        """Past an array of `length` strings (the vocabulary's loop: kept tight)."""
        data, at, end = self.data, self.at, len(self.data)
        unpack = struct.Struct(self.order + "Q").unpack_from
        for _ in range(length):
            if at + 8 > end:
                raise self.truncated()
            size = unpack(data, at)[0]
            at += 8
            if size > min(MAX_STRING, end - at):
                self.at = at - 8
                self.skip(f"an element of metadata '{key}'", MAX_STRING)  # says which limit
            at += size
        self.at = at

    def header(self) -> Header:
        version = self.number("I")
        if version & 0xFFFF == 0:  # written on a machine of the other byte order
            self.order = ">"
            version = struct.unpack(">I", struct.pack("<I", version))[0]
        if version not in (2, 3):
            raise self.refuse(f"GGUF version {version}, which this cannot read (only 2 and 3)")
        tensors, keys = self.take("QQ")
        self.count("the header", tensors, 1, MAX_TENSORS, "tensors")
        self.count("the header", keys, 1, MAX_KEYS, "metadata keys")
        values: dict[str, object] = {}
        elements = 0
        for _ in range(keys):
            key = self.text(f"a metadata key at byte {self.at:,}", MAX_NAME)
            if key in values:
                raise self.refuse(f"metadata '{key}' is given twice")
            values[key], found = self.value(key)
            elements += found
            if elements > MAX_ELEMENTS:
                raise self.refuse(
                    f"metadata arrays hold more than the {MAX_ELEMENTS:,} elements allowed in all"
                )
        alignment = values.get("general.alignment", 32)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise self.refuse(f"general.alignment {alignment!r} is not a power of two")
        infos = [self.tensor_info(alignment) for _ in range(tensors)]
        start = -(-self.at // alignment) * alignment
        kept = {k: v for k, v in values.items() if v is not None}
        return Header(kept, elements, self.placed(infos, start))

    def value(self, key: str) -> tuple[object, int]:
        """The value of `key` (None for strings not kept and for arrays) and how many array
        elements it holds."""
        kind = self.number("I")
        if key == "general.alignment" and kind != UINT32:
            raise self.refuse("general.alignment is not a uint32")
        if kind in SCALARS:
            return self.number(SCALARS[kind]), 0
        if kind == STRING:
            if key in KEPT_TEXT:
                return self.text(key, MAX_STRING), 0
            self.skip(f"metadata '{key}'", MAX_STRING)
            return None, 0
        if kind != ARRAY:
            raise self.refuse(f"metadata '{key}' has unknown type {kind}")
        inner, length = self.take("IQ")
        if inner == STRING:
            self.count(f"metadata '{key}'", length, 8, 1 << 64)
            if key == VOCABULARY and length > MAX_VOCABULARY:
                raise self.refuse(
                    f"a vocabulary of {length:,} tokens ({key}), more than the "
                    f"{MAX_VOCABULARY:,} allowed"
                )
            self.strings(key, self.count(f"metadata '{key}'", length, 8, MAX_ARRAY))
        elif inner in SCALARS:
            size = struct.calcsize(SCALARS[inner])
            self.at += size * self.count(f"metadata '{key}'", length, size, MAX_ARRAY)
        else:
            raise self.refuse(f"metadata '{key}' is an array of type {inner}, not of values")
        return None, length

    def tensor_info(self, alignment: int) -> tuple[str, int, tuple, int]:
        name = self.text(f"a tensor name at byte {self.at:,}", MAX_NAME)
        dims = self.number("I")
        if dims > MAX_DIMS:
            raise self.refuse(f"tensor '{name}' has {dims} dimensions, more than {MAX_DIMS}")
        shape = self.take(f"{dims}Q")
        kind, offset = self.take("IQ")
        if offset % alignment:
            raise self.refuse(f"tensor '{name}' starts off its {alignment}-byte alignment")
        return name, kind, shape, offset

    def placed(self, infos: list, start: int) -> list[TensorInfo]:
        """The tensors with their bytes, each inside the file and none over another."""
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType  # lazy: gguf

        tensors, names = [], set()
        for name, kind, shape, offset in infos:
            if name in names:
                raise self.refuse(f"tensor '{name}' is given twice")
            names.add(name)
            try:
                ggml = GGMLQuantizationType(kind)
                block, block_bytes = GGML_QUANT_SIZES[ggml]
            except (ValueError, KeyError):
                raise self.refuse(f"tensor '{name}' has unknown type {kind}") from None
            if shape and shape[0] % block:
                raise self.refuse(f"tensor '{name}': rows of {shape[0]} values are not whole "
                                  f"{ggml.name} blocks of {block}")  # fmt: skip
            elements = math.prod(shape)
            size = elements // block * block_bytes
            if start + offset + size > len(self.data):
                raise UserError(
                    f"{self.name} is truncated: tensor '{name}' ends at byte "
                    f"{start + offset + size:,}, the file at {len(self.data):,}"
                )
            tensors.append(
                TensorInfo(name, ggml.name, elements, start + offset, size, tuple(shape), kind)
            )
        ordered = sorted(tensors, key=lambda t: (t.start, t.size))
        for before, after in itertools.pairwise(ordered):
            if after.start < before.start + before.size:
                raise self.refuse(
                    f"tensor '{after.name}' overlaps tensor '{before.name}' (bytes "
                    f"{after.start:,} to {after.start + after.size:,})"
                )
        return tensors

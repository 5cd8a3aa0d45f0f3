"""What a writer is told about models: the built-in one is for trying the app, and the size of
model that writes real fiction on this machine, from its memory and (where a load measured it)
its speed, with how to add one and the memory that takes.

The built-in model has 135M parameters: over long takes it forgets the heroine's name, ignores a
direction and drifts off the story. Models that keep a story straight start around 7-8B.
Decoding reads every weight once a token, so a bigger model's time per token is, roughly, the
measured one scaled by its weight bytes. No torch, no Qt: the welcome screen and the Models
dialog ask for this as they open."""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from swiftwriter.errors import UserError
from swiftwriter.modelstore import loader, provision, registry
from swiftwriter.modelstore.placement import DTYPE_BYTES, kv_bytes_per_token, stored_cache_dtype
from swiftwriter.words import DEFAULT_TOKENS_PER_WORD

GIB = 1 << 30
CONTEXT = 8192  # tokens of context the memory is counted for (the Models dialog's estimate's)
RUNTIME = 1 * GIB  # the app itself: Python, torch, Qt and the text
SHARE = 0.8  # of the machine's memory a model may take; the rest is the system's and the writer's
Q4_K_M_BITS = 4.85  # bits a weight of a Q4_K_M GGUF file, averaged over its tensors
# Converting a GGUF reads every weight into float32 and copies it into a fresh model before it
# is written (provision.py): the default model's 135M-parameter GGUF peaked at 1.6 GB of
# resident memory converting into bfloat16, 8 bytes a parameter beside the interpreter's own.
CONVERTING_BYTES = 8


def bytes_per_parameter(dtype: str) -> float:
    """A weight's bytes in `dtype`; "stored" (a GGUF's blocks as they are) counts the
    Q4_K_M files writers download."""
    return DTYPE_BYTES.get(dtype, Q4_K_M_BITS / 8)


@dataclass(frozen=True)
class SizeClass:
    """Open models of one size, by one representative's shape (its parameters and KV cache)."""

    label: str  # "7-8B"
    parameters: float
    examples: str
    layers: int
    kv_heads: int
    head_dim: int = 128

    def weight_bytes(self, dtype: str) -> int:
        return int(self.parameters * bytes_per_parameter(dtype))

    def running_bytes(self, dtype: str) -> int:
        """Weights, a KV cache of CONTEXT tokens and the app itself."""
        shape = SimpleNamespace(num_hidden_layers=self.layers, num_key_value_heads=self.kv_heads,
                                head_dim=self.head_dim)  # fmt: skip
        cache = dtype if dtype in DTYPE_BYTES else stored_cache_dtype()  # stored blocks
        return self.weight_bytes(dtype) + kv_bytes_per_token(shape, cache) * CONTEXT + RUNTIME


CLASSES = (
    SizeClass("1.5B", 1.54e9, "Qwen2.5 1.5B Instruct", 28, 2),
    SizeClass("3-4B", 3.21e9, "Llama 3.2 3B or Qwen2.5 3B Instruct", 28, 8),
    SizeClass("7-8B", 8.03e9, "Llama 3.1 8B or Qwen2.5 7B Instruct", 32, 8),
    SizeClass("12-14B", 14.8e9, "Mistral Nemo 12B or Qwen2.5 14B Instruct", 48, 8),
    SizeClass("24-32B", 32.8e9, "Mistral Small 24B or Qwen2.5 32B Instruct", 64, 8),
)
FICTION = CLASSES[2]  # the smallest size that keeps a story straight


@dataclass(frozen=True)
class Speed:
    """A measured one-token pass: `seconds` for `weight_bytes` of weights in `dtype`."""

    dtype: str
    seconds: float
    weight_bytes: int

    def words_a_minute(self, size: SizeClass) -> float:
        seconds = self.seconds * size.weight_bytes(self.dtype) / self.weight_bytes
        return 60 / seconds / DEFAULT_TOKENS_PER_WORD


@dataclass(frozen=True)
class Advice:
    """The size class to recommend on a machine with `memory` bytes (None: unknown), running
    in `dtype`; `size` None when nothing bigger than the built-in model fits."""

    memory: int | None
    dtype: str
    size: SizeClass | None
    speed: Speed | None = None
    built_in: str = "SmolLM2-135M-Instruct"  # the default model's name

    def _run(self, size: SizeClass) -> str:
        pace = ""
        if self.speed is not None:
            pace = f", about {round_words(self.speed.words_a_minute(size))} words a minute here"
        return f"about {gb(size.running_bytes(self.dtype))} of memory while it writes{pace}"

    def recommendation(self) -> str:
        """One or two sentences: the size to add, or why none is."""
        fiction = (
            f"models that keep a story straight start at {FICTION.label}, which take about "
            f"{gb(FICTION.running_bytes(self.dtype))} of memory"
        )
        if self.memory is None:
            return f"Fiction wants a {FICTION.label} model such as {FICTION.examples}: " + (
                f"{self._run(FICTION)}."
            )
        machine = f"This computer ({gb(self.memory)} of memory)"
        if self.size is None:
            return f"{machine} has room for the built-in model only: {fiction}."
        said = (
            f"{machine} can run a {self.size.label} model such as {self.size.examples}: "
            f"{self._run(self.size)}."
        )
        if self.size.parameters < FICTION.parameters:
            said += f" It writes better than the built-in model, but {fiction}."
        return said

    def built_in_text(self) -> str:
        return (
            f"The built-in model ({self.built_in}) is for trying SwiftWriter: it is too small "
            "to keep a story straight, so names slip, directions are missed and long takes drift."
        )

    def choosing_text(self) -> str:
        """What the built-in model is for, and the size to add here."""
        return f"{self.built_in_text()} {self.recommendation()}"

    def welcome_text(self) -> str:
        return f"{self.choosing_text()} To add one: Tools › Models…"

    def adding_text(self) -> str:
        """How to add the recommended size, and the memory adding it takes ("" with none)."""
        if self.size is None:
            return ""
        size = self.size
        converting = int(size.parameters * CONVERTING_BYTES) + RUNTIME // 2
        gguf = f"a GGUF file (about {file_gb(size.parameters * Q4_K_M_BITS / 8)} as Q4_K_M)"
        said = (
            f"A {size.label} model is added as a Hugging Face folder "
            f"({file_gb(size.weight_bytes(self.dtype))} of {self.dtype} weights, used as it is)"
        )
        if self.memory and converting > self.memory:
            said += (
                f". {gguf[0].upper()}{gguf[1:]} is de-quantised into such a folder first, which "
                f"needs about {gb(converting)} of memory: more than this computer has."
            )
        else:
            said += (
                f", or as {gguf}, de-quantised into such a folder once, which needs about "
                f"{gb(converting)} of memory."
            )
        float32 = size.weight_bytes("float32") + RUNTIME
        if self.dtype != "float32" and self.memory and float32 > self.memory:
            said += (
                f" Set Precision to {self.dtype} before you use it: auto would first load it in "
                f"float32 (about {gb(float32)}) to measure which is faster."
            )
        return said


def gb(size: int | float | None) -> str:
    """'18 GB', '4.6 GB' (binary gigabytes, as a system names its memory)."""
    value = (size or 0) / GIB
    return f"{value:.0f} GB" if value >= 10 else f"{value:.1f} GB"


def file_gb(size: float) -> str:
    """'4.9 GB', '16 GB' (decimal gigabytes, as download pages and file managers say)."""
    value = size / 1e9
    return f"{value:.0f} GB" if value >= 10 else f"{value:.1f} GB"


def round_words(words: float) -> str:
    """Words a minute, to two figures: an estimate is no more precise."""
    if words >= 100:
        return f"{round(words, -1):,.0f}"
    return f"{words:.0f}" if words >= 10 else f"{words:.1f}"


def advise(memory: int | None, dtype: str = "bfloat16", speed: Speed | None = None,
           built_in: str = "SmolLM2-135M-Instruct") -> Advice:  # fmt: skip
    """The largest size class whose weights, KV cache and the app fit in SHARE of `memory`
    (unknown memory: the fiction size, said without this machine's figures)."""
    if memory is None:
        return Advice(None, dtype, FICTION, speed, built_in)
    fitting = [c for c in CLASSES if c.running_bytes(dtype) <= SHARE * memory]
    return Advice(memory, dtype, fitting[-1] if fitting else None, speed, built_in)


def total_memory() -> int | None:
    """This machine's memory in bytes; None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def folder_parameters(folder: Path) -> int | None:
    """The parameters in a folder's safetensors files, from their headers (no weights read)."""
    total = 0
    files = sorted(Path(folder).glob("*.safetensors"))
    try:
        for file in files:
            with file.open("rb") as fh:
                (length,) = struct.unpack("<Q", fh.read(8))
                header = json.loads(fh.read(length))
            for name, tensor in header.items():
                if name != "__metadata__":
                    count = 1
                    for dim in tensor["shape"]:
                        count *= int(dim)
                    total += count
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None
    return total or None


def measured_speed(entry) -> Speed | None:
    """The speed an earlier load measured for `entry` on this CPU (loader.remembered_pass)."""
    found = loader.remembered_pass(entry)
    if not found:
        return None
    dtype, seconds = found
    if dtype == loader.STORED:  # the blocks the pass read: the GGUF file's
        weights = gguf_bytes(entry)
    else:
        parameters = folder_parameters(entry.folder())
        weights = parameters * DTYPE_BYTES[dtype] if parameters else None
    return Speed(dtype, seconds, weights) if weights else None


def gguf_bytes(entry) -> int | None:
    """The size of the GGUF file an entry's weights are read from (None when it is gone, or
    the model is no GGUF: the Models dialog asks for any model the writer selects)."""
    if entry.source not in provision.GGUF_SOURCES:
        return None
    try:
        return provision.locate_gguf(entry).stat().st_size
    except (UserError, OSError, AttributeError):
        return None


def for_this_machine(current: str | None = None) -> Advice:
    """The advice here, for the registry's models: the speed a load measured for the model in
    use (`current`, an id) or else the default one, and the dtype it chose (bfloat16 where
    none was measured)."""
    try:
        known = registry.load_registry()
    except UserError:  # a damaged user registry: the Models dialog says so itself
        known = {}
    default = next((e for e in known.values() if e.default), None)
    entries = [e for e in (known.get(current or ""), default) if e is not None]
    speed = next(filter(None, (measured_speed(e) for e in entries)), None)
    name = default.name if default else "the default model"
    return advise(total_memory(), speed.dtype if speed else "bfloat16", speed, name)

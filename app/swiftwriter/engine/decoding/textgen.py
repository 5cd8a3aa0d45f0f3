"""The tokenizer edge of the engine: text in, text pieces out, decoded incrementally so that a
multi-byte character split across tokens is never shown half-made."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading

from swiftwriter.errors import UserError, is_native_panic


def encode(tokenizer, text: str) -> list[int]:
    """Text -> ids without special tokens: the one way text enters the engine (prompts,
    documents, history, training text). A tokenizer whose own code panics on the text (a
    pattern that backtracks without end) fails as one line naming it."""
    if not text:
        return []
    try:
        with _native_stderr_held():
            return list(tokenizer.encode(text, add_special_tokens=False))
    except BaseException as exc:
        if not is_native_panic(exc):
            raise
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        first = (str(exc).strip().splitlines() or ["a panic"])[0][:200]
        raise UserError(f"The tokenizer of {name} failed on this text: {first}") from None


class _Held:
    """The state of fd 2 while tokenizer calls run (shared by the threads that overlap)."""

    lock = threading.Lock()
    users = 0
    saved: int | None = None
    file = None
    panicked = False


_held = _Held()


@contextlib.contextmanager
def _native_stderr_held():
    """fd 2 goes to a temporary file while the tokenizer runs, and what it got is written out
    after, unless the call panicked: Rust's panic hook writes its report (a whole backtrace
    where RUST_BACKTRACE is set) straight to fd 2, and the panic is reported as one line."""
    with _held.lock:
        if _held.users == 0:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
                _held.file = tempfile.TemporaryFile()  # noqa: SIM115 - closed when given back
                _held.saved = os.dup(2)
                os.dup2(_held.file.fileno(), 2)
        _held.users += 1
    try:
        yield
    except BaseException as exc:
        if is_native_panic(exc):
            _held.panicked = True  # its report is dropped: the caller says it in one line
        raise
    finally:
        with _held.lock:
            _held.users -= 1
            if _held.users == 0:
                _give_back_stderr()


def _give_back_stderr() -> None:
    if _held.saved is not None:
        os.dup2(_held.saved, 2)
        os.close(_held.saved)
    if _held.file is not None:
        _held.file.seek(0)
        caught = _held.file.read()
        _held.file.close()
        while caught and not _held.panicked:
            caught = caught[os.write(2, caught) :]
    _held.saved, _held.file, _held.panicked = None, None, False


class IncrementalDecoder:
    """Emit only text that later tokens can no longer change (prefix/read offsets, as in TGI)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.prefix_offset = 0
        self.read_offset = 0
        self.shown: list[str] = []

    def push(self, ids: list[int]) -> str:
        self.ids.extend(ids)
        decode = self.tokenizer.decode
        prefix_text = decode(
            self.ids[self.prefix_offset : self.read_offset], skip_special_tokens=True
        )
        new_text = decode(self.ids[self.prefix_offset :], skip_special_tokens=True)
        if len(new_text) > len(prefix_text) and not new_text.endswith("\ufffd"):
            self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
            piece = new_text[len(prefix_text) :]
            self.shown.append(piece)
            return piece
        return ""

    def finish(self) -> str:
        """The text still held back at the end (a last partial glyph), once."""
        full = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        shown = "".join(self.shown)
        tail = full[len(shown) :] if full.startswith(shown) else ""
        if tail:
            self.shown.append(tail)
        return tail


def eos_ids_of(tokenizer, model) -> list[int]:
    ids = set()
    for source in (getattr(model, "generation_config", None), model.config, tokenizer):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return sorted(ids)

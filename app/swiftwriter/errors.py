"""One exception type for mistakes a user can fix; the CLI and the app show its message alone,
and `printable` keeps what the CLI prints from driving the terminal. The CLI exits 1 for a
`UserError` and 2 for a `UsageError` (a command line that cannot mean anything, as argparse's
own errors), so scripts can tell a missing file from a mistyped command."""

import re

# C0 and C1 controls and DEL, which a terminal obeys, and lone surrogates (a file name's bytes
# that are not UTF-8), which a strict UTF-8 stdout cannot print.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


class UserError(Exception):
    """Bad input or a missing resource: shown as one clear line, never as a traceback."""


class UsageError(UserError):
    """Arguments that contradict each other (what argparse would refuse if it could): exit 2."""


def printable(text: object) -> str:
    """`text` on one line with its control characters shown as escapes (ESC as \\x1b), and a
    file name's undecodable byte as the byte (\\xff)."""
    return _UNPRINTABLE.sub(_escape, str(text))


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for a byte that is not UTF-8
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def is_native_panic(exc: BaseException) -> bool:
    """A Rust library's panic surfaced by pyo3 (the tokenizers' regex engine giving up on a
    pattern that backtracks without end): a BaseException, so `except Exception` misses it, yet
    it means only that one call failed, not that the program must stop."""
    kind = type(exc)
    return kind.__name__ == "PanicException" and kind.__module__ == "pyo3_runtime"

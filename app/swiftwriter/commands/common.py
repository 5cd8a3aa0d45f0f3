"""Argument helpers shared by the CLI subcommands."""

from __future__ import annotations

import argparse
from pathlib import Path

from swiftwriter.errors import UserError


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from exc


def non_negative_int(text: str) -> int:
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or more, not {value}")
    return value


def positive_int(text: str) -> int:
    value = _whole(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {value}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from exc
    if value < 0 or value != value:
        raise argparse.ArgumentTypeError(f"must be zero or more, not {text}")
    return value


def positive_float(text: str) -> float:
    value = non_negative_float(text)
    if value == 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def read_text_file(path: str) -> str:
    """A prompt or training text file, read as imports read text (UTF-8 or with a byte-order
    mark, binary refused, the first bad byte named)."""
    from swiftwriter.export.importers import read_text

    file = Path(path).expanduser()
    if not file.is_file():
        raise UserError(f"No such file: {file}")
    return read_text(file)

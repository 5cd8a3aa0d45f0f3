"""Argument helpers shared by the CLI subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from swiftwriter.errors import UsageError, UserError


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


def renamed(new_value, old_value, old_form: str, new_form: str):
    """The value of an argument given in its old spelling (`old_form`, kept so that writers'
    scripts keep working) or its new one; the old one says the new form in one line on stderr."""
    if old_value is None:
        return new_value
    if new_value is not None:
        raise UsageError(f"{old_form} and {new_form} say the same thing: give only {new_form}")
    print(f"swiftwriter: {old_form} is deprecated: write {new_form}", file=sys.stderr)
    return old_value


def print_json(value) -> None:
    """A listing as JSON on stdout, alone (ASCII: a title's control characters and a file
    name's undecodable bytes are escapes, never raw on a terminal)."""
    json.dump(value, sys.stdout, indent=2, ensure_ascii=True)
    sys.stdout.write("\n")

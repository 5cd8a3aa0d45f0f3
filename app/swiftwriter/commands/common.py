"""Argument helpers shared by the CLI subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from swiftwriter.engine.decoding.settings import MODES
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


def read_text_file(path: str, encoding: str | None = None) -> str:
    """A prompt or training text file, read as imports read text (UTF-8 or with a byte-order
    mark, binary refused, the first bad byte named; `encoding` when the writer names one)."""
    from swiftwriter.export.importers import read_text  # lazy: pulls in docx

    file = Path(path).expanduser()
    if not file.is_file():
        raise UserError(f"No such file: {file}")
    return read_text(file, encoding)


def add_encoding(parser: argparse.ArgumentParser) -> None:
    """--encoding, as `project import` has it: what the refusal of a file that is not UTF-8
    tells the writer to give."""
    parser.add_argument(
        "--encoding",
        help="the text files' encoding when it is not UTF-8 (for example cp1252, latin-1)",
    )


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """--model, --device and --dtype, as the commands that load a model for a run say them."""
    parser.add_argument("--model", help="registry id or model folder (default: the default model)")
    parser.add_argument("--device", default="auto", help="cpu, cuda:N, mps or auto (the default)")
    parser.add_argument(
        "--dtype",
        default="auto",
        help="auto (measured), stored (a GGUF file's blocks, on the CPU), float32, bfloat16 "
        "or float16",
    )


def mode_words(name: str) -> str:
    """'temperature 0.8, top-p 0.95, min-p 0.05, penalty 1.1 over 1,024, DRY 0.8', or
    'greedy, penalty 1.2 over 1,024': an app mode as --help says it."""
    mode = MODES[name]
    words = (
        ["greedy"]
        if mode.greedy
        else [f"temperature {mode.temperature}", f"top-p {mode.top_p}", f"min-p {mode.min_p}"]
    )
    words.append(f"penalty {mode.penalty} over {mode.window:,}")
    if mode.dry_multiplier:
        words.append(f"DRY {mode.dry_multiplier}")
    return ", ".join(words)


def modes_help() -> str:
    """Every app mode for --preset's help: 'creative: temperature 0.8, ...; precise: ...'."""
    return "; ".join(f"{name}: {mode_words(name)}" for name in sorted(MODES))


# Sampler options, by the SamplingSettings field each sets: given, one takes the place of the
# preset's value
SAMPLER_OPTIONS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "min_p": "min_p",
    "penalty": "penalty",
    "window": "window",
    "dry": "dry_multiplier",
}
SAMPLED_ONLY = ("temperature", "top_p", "min_p")  # nothing to greedy decoding


def sampler_overrides(args: argparse.Namespace, greedy: bool, chosen: str) -> dict:
    """The sampler values given on the command line, by SamplingSettings field (top-p above 1
    is 1); one that only sampling uses is refused when `chosen` (the option that chose, e.g.
    '--preset precise') is greedy."""
    if greedy:
        for option in SAMPLED_ONLY:
            if getattr(args, option, None) is not None:
                flag = "--" + option.replace("_", "-")
                raise UserError(f"{flag} applies to sampled text, and {chosen} is greedy decoding")
    given = {
        field: getattr(args, option)
        for option, field in SAMPLER_OPTIONS.items()
        if getattr(args, option, None) is not None
    }
    if "top_p" in given:
        given["top_p"] = min(1.0, given["top_p"])
    return given


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

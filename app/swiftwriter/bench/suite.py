"""The held-out prompt suite: prompts in several genres that no drafter trained on, so that a
speed claim says how the engine does on text it has never seen, not on one familiar prompt.

The suite is a folder of plain-text prompts and a `suite.toml` naming each one's genre, source
and licence. `means_by_method` turns per-prompt bench reports into the geometric mean of each
method's speed ratio to `ar` and to `hf` (a ratio exists only where the two texts are
identical), with the slowest prompt beside it: a mean can hide a prompt where speculation
loses."""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from swiftwriter import paths
from swiftwriter.errors import UserError

SUITES = {"held-out": "heldout"}


@dataclass(frozen=True)
class SuitePrompt:
    name: str
    genre: str
    source: str
    licence: str
    path: Path

    @property
    def text(self) -> str:
        return self.path.read_text(encoding="utf-8")


def suite_dir(name: str = "held-out") -> Path:
    if name not in SUITES:
        raise UserError(f"Unknown suite '{name}'; known: {', '.join(SUITES)}")
    return paths.resources_dir() / "prompts" / SUITES[name]


def load_suite(name: str = "held-out") -> list[SuitePrompt]:
    """The suite's prompts in the manifest's order; a manifest naming a missing file, or an
    entry without its genre, source or licence, is an error (provenance is part of the suite)."""
    folder = suite_dir(name)
    manifest = folder / "suite.toml"
    try:
        entries = tomllib.loads(manifest.read_text(encoding="utf-8")).get("prompt", [])
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"Cannot read the suite manifest {manifest}: {exc}") from exc
    prompts = []
    for entry in entries:
        missing = [k for k in ("name", "genre", "source", "licence") if not entry.get(k)]
        if missing:
            raise UserError(f"{manifest}: an entry lacks {', '.join(missing)}: {entry}")
        path = folder / f"{entry['name']}.txt"
        if not path.is_file():
            raise UserError(f"{manifest}: no prompt file {path.name}")
        prompts.append(
            SuitePrompt(entry["name"], entry["genre"], entry["source"], entry["licence"], path)
        )
    return prompts


def select(prompts: Sequence[SuitePrompt], names: str | None) -> list[SuitePrompt]:
    """The prompts named in a comma-separated list (all when None), in the list's order."""
    if not names:
        return list(prompts)
    by_name = {p.name: p for p in prompts}
    chosen = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in by_name]
    if unknown or not chosen:
        raise UserError(f"Unknown suite prompts {unknown or names!r}; known: {', '.join(by_name)}")
    return [by_name[n] for n in chosen]


_WORD = re.compile(r"[a-z0-9']+")


def word_ngrams(text: str, n: int = 8) -> set[tuple[str, ...]]:
    """Runs of n words, lower-cased, punctuation and layout ignored."""
    words = _WORD.findall(text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def leaked(prompt: str, training: Iterable[str], n: int = 8) -> set[tuple[str, ...]]:
    """The n-word runs of `prompt` that occur in any of the training texts."""
    grams = word_ngrams(prompt, n)
    found: set[tuple[str, ...]] = set()
    for text in training:
        found |= grams & word_ngrams(text, n)
    return found


def geometric_mean(values: Sequence[float]) -> float | None:
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def means_by_method(reports: dict[str, dict]) -> dict:
    """{label: bench report} (one per prompt, or per prompt and seed) -> per method: the
    geometric mean of its ratio to `ar` and to `hf` over the labels where a ratio exists, the
    slowest label against `ar`, how many labels wrote another text than `ar`, and mean tau."""
    methods: list[str] = []
    for report in reports.values():
        methods += [m for m in report if m not in methods]
    out = {}
    for method in methods:
        rows = {label: r[method] for label, r in reports.items() if method in r}
        vs_ar = {k: row["speedup_vs_ar"] for k, row in rows.items() if row.get("speedup_vs_ar")}
        vs_hf = [row["speedup_vs_hf"] for row in rows.values() if row.get("speedup_vs_hf")]
        taus = [row["tau"] for row in rows.values() if row.get("tau")]
        slowest = min(vs_ar, key=vs_ar.get) if vs_ar else None
        out[method] = {
            "prompts": len(rows),
            "geomean_vs_ar": _round(geometric_mean(list(vs_ar.values()))),
            "geomean_vs_hf": _round(geometric_mean(vs_hf)),
            "min_vs_ar": vs_ar[slowest] if slowest else None,
            "slowest": slowest,
            "different_from_ar": sum(row.get("identical_to_ar") is False for row in rows.values()),
            "geomean_tokens_per_s": _round(
                geometric_mean(
                    [row["tokens_per_s"] for row in rows.values() if row["tokens_per_s"]]
                )
            ),
            "mean_tau": _round(sum(taus) / len(taus)) if taus else None,
        }
        for key in ("host_ms_per_step", "model_ms_per_step"):
            per_step = [row["stats"][key] for row in rows.values() if key in row.get("stats", {})]
            out[method][f"mean_{key}"] = _round(sum(per_step) / len(per_step)) if per_step else None
        hits = [row["drafter_accuracy"] for row in rows.values() if row.get("drafter_accuracy")]
        if hits:
            out[method]["drafter_accuracy"] = mean_hits(hits)
    return out


def mean_hits(hits: Sequence[dict]) -> dict:
    """Per draft position, the drafter's top-1 / top-3 over several texts, weighted by their
    positions."""
    total = sum(h["positions"] for h in hits) or 1
    depth = min(len(h["top1"]) for h in hits)
    return {
        key: [round(sum(h[key][i] * h["positions"] for h in hits) / total, 4) for i in range(depth)]
        for key in ("top1", "top3")
    } | {"positions": total}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def format_summary(summary: dict) -> str:
    """The suite's summary as a table: one line per method."""
    lines = [
        f"{'method':<20} {'prompts':>7} {'tok/s (gm)':>10} {'tau':>5} "
        f"{'ms/step host+model':>18} {'vs ar (gm)':>10} "
        f"{'vs hf (gm)':>10} {'slowest vs ar':>22} {'diff. text':>10}"
    ]
    for method, s in summary.items():
        slow = f"{s['min_vs_ar']:.2f}x {s['slowest']}" if s["slowest"] else "-"
        host, model = s.get("mean_host_ms_per_step"), s.get("mean_model_ms_per_step")
        step = "-" if host is None or model is None else f"{host:.1f} + {model:.1f}"
        lines.append(
            f"{method:<20} {s['prompts']:>7} {_num(s['geomean_tokens_per_s'], '.1f'):>10} "
            f"{_num(s['mean_tau'], '.2f'):>5} {step:>18} {_num(s['geomean_vs_ar'], '.2f', 'x'):>10} "
            f"{_num(s['geomean_vs_hf'], '.2f', 'x'):>10} {slow:>22} {s['different_from_ar']:>10}"
        )
    for method, s in summary.items():
        if s.get("drafter_accuracy"):
            hits = s["drafter_accuracy"]
            lines.append(
                f"drafter on {method}'s text ({hits['positions']} positions): " + format_hits(hits)
            )
    return "\n".join(lines)


def _num(value: float | None, spec: str, unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def format_hits(hits: dict) -> str:
    """A drafter's hits in one line: top-1 and top-3 by draft position."""
    top1 = " / ".join(f"{v:.2f}" for v in hits["top1"])
    return f"top-1 by position {top1}, top-3 " + " / ".join(f"{v:.2f}" for v in hits["top3"])

"""Per-machine measurements (CPU dtype, product kernel, weight layout, float16 products), kept in
the data folder's measurements.json only when they hold up.

Under another process's load a measurement once timed bfloat16's one-token pass at 0.80 s
against float32's 38 ms (quiet: 23 against 36 ms), and every later `auto` run took float32
silently. So each measurement is taken in two independent rounds and remembered only when the
machine was quiet: the repetitions of each kind within SPREAD of each other, the two rounds
within AGREE, and the CPUs not taken by other processes meanwhile (`load_facts`). An unquiet one
serves this run only and leaves nothing behind. Each entry says when and how it was taken; one
without that (earlier versions), whose recorded numbers fail these checks, or that a take has
contradicted (`mark_stale`) is measured again."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from swiftwriter import __version__, atomic, paths

FORMAT = 1
SPREAD = 3.0  # slowest / fastest repetition of one kind in one round
AGREE = 1.5  # one round's median of a kind / the other round's
OTHERS = 0.25  # share of all CPUs other processes may take while we measure
LOAD_PER_CPU = 1.5  # without /proc/stat: the 1-minute load average per CPU that means busy

Samples = dict[str, list[float]]  # kind -> seconds of each repetition


@dataclass
class Measured:
    """One measurement's outcome, read back or taken now."""

    key: str
    value: object  # what `decide` made of the numbers
    seconds: dict[str, float]  # kind -> seconds (the lower of the two rounds' medians)
    taken: dict = field(default_factory=dict)  # when and how: see `_taken`
    remembered: bool = False  # read back, or stored now
    unquiet: list[str] = field(default_factory=list)  # why it was not stored

    @property
    def date(self) -> str:
        return str(self.taken.get("at", ""))[:10]


# The measurements this process took, by key (remembered or not): `swiftwriter models measure`
# prints them.
recent: dict[str, Measured] = {}
_local = threading.local()  # this thread's timing-loop clock (see `timed`)


def _clock() -> dict:
    if not hasattr(_local, "clock"):
        _local.clock = {"others": 0.0, "wall": 0.0, "used": False}
    return _local.clock


@contextlib.contextmanager
def timed():
    """Count what other processes took of the CPUs during a timing loop toward the load check
    (the rest of a measurement, such as loading the model, does not time anything)."""
    wall, others = time.perf_counter(), _others_cpu_s()
    try:
        yield
    finally:
        clock = _clock()
        clock["others"] += _others_cpu_s() - others
        clock["wall"] += time.perf_counter() - wall
        clock["used"] = True


def _others_cpu_s() -> float:
    """CPU seconds all processes but this one have used since boot (from /proc/stat, steal
    time included: a virtual machine's neighbours take CPUs too); nan where unknown."""
    try:
        fields = open("/proc/stat").readline().split()  # noqa: SIM115 (one line)
        ticks = [int(v) for v in fields[1:9]]
    except (OSError, ValueError, IndexError):
        return float("nan")
    busy = sum(ticks) - ticks[3] - ticks[4]  # all but idle and iowait
    mine = os.times()
    return busy / os.sysconf("SC_CLK_TCK") - (mine.user + mine.system)


def _clocked(measure: Callable[[], Samples]) -> tuple[Samples, float, float]:
    """`measure()` with the CPU seconds others used during its timing loops and their wall
    seconds (of the whole call where it marks none)."""
    clock = _clock()
    saved = dict(clock)
    clock.update(others=0.0, wall=0.0, used=False)
    wall, others = time.perf_counter(), _others_cpu_s()
    try:
        samples = measure()
        if clock["used"]:
            return samples, clock["others"], clock["wall"]
        return samples, _others_cpu_s() - others, time.perf_counter() - wall
    finally:
        clock.update(saved)


def cache_file():
    return paths.data_dir() / "measurements.json"


def _read() -> dict:
    cache = cache_file()
    try:
        known = json.loads(cache.read_text()) if cache.is_file() else {}
    except (OSError, ValueError):
        known = {}
    return known if isinstance(known, dict) else {}


def _update(change: Callable[[dict], None]) -> None:
    """Read the file again, change it and replace it whole (a measurement nested in another,
    or another process, may have written meanwhile); an unwritable folder only means measuring
    again next time. Under the file's lock: two processes measuring at once both land."""
    cache = cache_file()
    with contextlib.suppress(OSError), atomic.locked(cache):
        known = _read()
        before = json.dumps(known, sort_keys=True)
        change(known)
        if json.dumps(known, sort_keys=True) != before:
            atomic.replace_text(cache, json.dumps(known, indent=1))


def load_facts(others_s: float, wall_s: float) -> dict:
    """How busy the machine was while measuring: the share of all CPUs other processes took
    (None where /proc/stat is missing), and the 1-minute load average per CPU."""
    cpus = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    others = None
    if others_s == others_s and wall_s > 0:  # not nan
        others = round(min(max(others_s / (wall_s * cpus), 0.0), 1.0), 3)
    return {"others_share": others, "load_per_cpu": round(load / cpus, 3), "cpus": cpus}


def _medians(samples: Samples) -> dict[str, float]:
    return {kind: statistics.median(times) for kind, times in samples.items() if times}


def _spreads(rounds: list[Samples]) -> dict[str, float]:
    """Slowest / fastest repetition of each kind, the worse of the rounds."""
    out: dict[str, float] = {}
    for samples in rounds:
        for kind, times in samples.items():
            if times:
                ratio = max(times) / max(min(times), 1e-9)
                out[kind] = round(max(out.get(kind, 1.0), ratio), 3)
    return out


def unquiet_reasons(taken: dict) -> list[str]:
    """Why a measurement taken as `taken` records cannot be trusted (empty: it can)."""
    why = []
    rounds = taken.get("rounds") or []
    load = taken.get("load") or {}
    others = load.get("others_share", 1.0)
    if others is None and load.get("load_per_cpu", 0.0) > LOAD_PER_CPU:
        why.append(f"load average {load.get('load_per_cpu', 0.0):.1f} per CPU")
    elif others is not None and others > OTHERS:
        why.append(f"other processes took {others:.0%} of the CPUs")
    for kind, ratio in sorted((taken.get("spread") or {}).items()):
        if ratio > SPREAD:
            why.append(f"{kind} repetitions {ratio:.1f}x apart")
    if len(rounds) < 2:
        return [*why, "one round only"]
    a, b = rounds[0], rounds[1]
    for kind in sorted(set(a) & set(b)):  # a search that stops early may time fewer kinds
        ratio = max(a[kind], b[kind]) / max(min(a[kind], b[kind]), 1e-9)
        if ratio > AGREE:
            why.append(f"rounds disagree on {kind} ({ratio:.1f}x)")
    return why


def _taken(rounds: list[Samples], load: dict) -> dict:
    return {
        "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "reps": {kind: len(times) for kind, times in rounds[0].items()},
        "rounds": [_medians(r) for r in rounds],
        "spread": _spreads(rounds),
        "load": load,
        "versions": {
            "swiftwriter": __version__,
            "python": platform.python_version(),
            "torch": _torch_version(),
        },
    }


def _torch_version() -> str:
    import torch  # lazy: torch

    return torch.__version__


def _lower(rounds: list[dict[str, float]]) -> dict[str, float]:
    kinds = set().union(*rounds) if rounds else set()
    return {k: min(r[k] for r in rounds if k in r) for k in sorted(kinds)}


def _trusted(entry, decide, plausible) -> Measured | None:
    """The stored entry as a Measured when it still holds up: new format, not stale, its
    recorded numbers quiet and plausible, and its value what they decide."""
    if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("stale"):
        return None
    taken, seconds = entry.get("taken"), entry.get("seconds")
    if not isinstance(taken, dict) or not isinstance(seconds, dict):
        return None
    try:
        seconds = {str(k): float(v) for k, v in seconds.items()}
        if unquiet_reasons(taken) or plausible(seconds) or decide(seconds) != entry.get("value"):
            return None
    except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError):
        return None
    return Measured("", entry["value"], seconds, taken, remembered=True)


def remembered(
    key: str,
    measure: Callable[[], Samples],
    decide: Callable[[dict[str, float]], object],
    plausible: Callable[[dict[str, float]], str] = lambda seconds: "",
    fallback: Callable[[], object] | None = None,
) -> Measured:
    """The measurement under `key`: read back when it holds up, else taken now in two rounds
    (`measure` returns each kind's repetitions, `decide` turns each kind's seconds into the
    value, `plausible` says what is wrong with them, "" when nothing) and stored only when
    the machine was quiet. With a `fallback`, a machine busy right now is not measured at all
    (it took a minute at every start and could pick the slower choice): the value of the
    last quiet measurement is kept, even one a take has since questioned, else `fallback()`;
    either is said not to be remembered, so the next quiet start measures."""
    stored_entry = _read().get(key)
    found = _trusted(stored_entry, decide, plausible)
    if found is not None:
        found.key = key
        return found
    if fallback is not None:
        busy = busy_now()
        if busy:  # a measurement now would be slow and wrong: the last quiet one, or a guess
            kept = _kept_when_busy(stored_entry)
            value = kept if kept is not None else fallback()
            result = Measured(key, value, {}, unquiet=[f"not measured: {busy}"])
            result.taken = {"kept": kept is not None}
            recent[key] = result
            return result
    rounds, others, wall = [], 0.0, 0.0
    for _ in range(2):
        samples, others_s, wall_s = _clocked(measure)
        rounds.append(samples)
        others, wall = others + others_s, wall + wall_s
        taken = _taken(rounds, load_facts(others, wall))
        if len(unquiet_reasons(taken)) > (len(rounds) == 1):  # no need for a second round
            break
    seconds = _lower(taken["rounds"])
    value = decide(seconds)
    why = unquiet_reasons(taken)
    odd = plausible(seconds)
    if odd:
        why.append(odd)
    result = Measured(key, value, seconds, taken, remembered=not why, unquiet=why)
    entry = {"format": FORMAT, "value": value, "seconds": seconds, "taken": taken}
    _update(lambda known: known.__setitem__(key, entry) if not why else known.pop(key, None))
    recent[key] = result
    return result


BUSY_PROBE_S = 0.3  # how long the machine is watched before measuring


def busy_now(probe_s: float = BUSY_PROBE_S) -> str:
    """Why the machine is too busy to measure on right now ("" when it is quiet enough):
    other processes' share of all CPUs over a short look (the load average per CPU where
    /proc/stat is missing)."""
    start, others = time.perf_counter(), _others_cpu_s()
    time.sleep(probe_s)
    facts = load_facts(_others_cpu_s() - others, time.perf_counter() - start)
    share = facts["others_share"]
    if share is None:
        per_cpu = facts["load_per_cpu"]
        return f"load average {per_cpu:.1f} per CPU" if per_cpu > LOAD_PER_CPU else ""
    return f"other processes took {share:.0%} of the CPUs" if share > OTHERS else ""


def _kept_when_busy(entry) -> object | None:
    """The value of a stored measurement that was taken quietly (stale or not), else None."""
    if not isinstance(entry, dict) or entry.get("format") != FORMAT or "value" not in entry:
        return None
    taken = entry.get("taken")
    if not isinstance(taken, dict):
        return None
    try:
        quiet = not unquiet_reasons(taken)
    except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError):
        return None
    return entry["value"] if quiet else None


def mark_stale(key: str, why: str) -> bool:
    """Have the entry under `key` measured again at its next use; False when there is none."""
    marked = []

    def change(known: dict) -> None:
        entry = known.get(key)
        if isinstance(entry, dict) and entry.get("format") == FORMAT and not entry.get("stale"):
            entry["stale"] = why
            marked.append(key)

    _update(change)
    return bool(marked)


def stored(key: str) -> dict | None:
    """The entry under `key` as stored (None without a current-format one)."""
    entry = _read().get(key)
    return entry if isinstance(entry, dict) and entry.get("format") == FORMAT else None


def stored_under(prefix: str) -> list[dict]:
    """Every current-format entry whose key starts with `prefix`, the newest first."""
    found = [
        entry
        for key, entry in _read().items()
        if key.startswith(prefix) and isinstance(entry, dict) and entry.get("format") == FORMAT
    ]
    return sorted(found, key=lambda e: str((e.get("taken") or {}).get("at", "")), reverse=True)


def forget(model_id: str) -> int:
    """Drop every measurement of one model (keys are 'what|model|...'); how many."""
    dropped = []

    def change(known: dict) -> None:
        for key in [k for k in known if k.split("|")[1:2] == [model_id]]:
            dropped.append(known.pop(key))

    _update(change)
    return len(dropped)

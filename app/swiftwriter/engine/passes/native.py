"""The tree-attention kernel (tree_attention.cpp), compiled once on the user's machine.

Why native code: a batch-invariant pass must give each trie row exactly what the one-token
pass gives it, and with PyTorch's attention that meant one call per row over the whole prefix
(a tree of eight rows cost eight prefix reads). The kernel reads the prefix once for every
row and still computes each row as a function of its own keys alone, so a tree pass costs
little more than a one-token pass, and the one-token pass itself is no slower than SDPA.

It is built with PyTorch's extension builder and the machine's C++ compiler into the user's
cache (once per source, CPU and torch version; about a minute on two cores), loaded only when
it is this user's alone and the very file that build recorded (anything else in the cache is
built again), and checked against PyTorch's attention before use. ninja comes with the package (found without PATH).
Without a compiler, or with SWIFTWRITER_NATIVE=0, `tree_attention()` returns None and the
passes use PyTorch's attention: exact still, slower for trees (a failed build says why in one
line, once). Which one a model uses is decided once, when its decoder is set up, so a run
never mixes the two."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import platform
import shutil
import stat
import sys
import time
from pathlib import Path

import torch

from swiftwriter import logs, paths
from swiftwriter.cpuinfo import cpu_flags

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("tree_attention.cpp")
# tuples: PyTorch's builder appends its own flags to the lists it is given, and a name hashed
# from a list it lengthened named the next build of the process differently (built again)
FLAGS = ("-O3", "-march=native", "-ffp-contract=off") + (
    # GCC keeps to 256-bit vectors otherwise
    ("-mprefer-vector-width=512",) if platform.machine().lower() in ("x86_64", "amd64") else ()
)
# the kernel's chunks run on PyTorch's threads only when built with OpenMP (without it
# at::parallel_for runs serially in an extension): twice as fast on 2 cores; a compiler
# without OpenMP gets the serial build
OPENMP = ("-fopenmp",)
DISABLE_ENV = "SWIFTWRITER_NATIVE"
# bfloat16 models on a build with AVX512-BF16 read their keys as bfloat16 pairs (pair dot
# products, probabilities rounded to bfloat16 for the values: PyTorch's own bfloat16 attention
# does the same); "0" keeps them on the float tiles (for comparing the two)
PAIRS_ENV = "SWIFTWRITER_NATIVE_PAIRS"
# on CPUs with AMX those pairs are summed by the tile unit (8 rows cost little more than one);
# "0" builds the kernel without it (for comparing the two)
AMX_ENV = "SWIFTWRITER_NATIVE_AMX"

# "module" -> the built module, or "error" -> why not; "distrusted": a build found and not
# loaded (not this user's alone, or not the file that was built), said once the build ends
_loaded: dict[str, object] = {}


def _cpu_flags() -> str:
    """What -march=native compiles for: a cache shared by two machines keeps one build each."""
    return cpu_flags() or platform.processor() or platform.machine()


def build_dir() -> Path:
    return paths.cache_dir() / "native"


def _flags() -> list[str]:
    return [*FLAGS, *(["-DSW_NO_AMX"] if _off(AMX_ENV) else [])]


def _name(flags: list[str] | None = None, source: Path = SOURCE) -> str:
    flags = _flags() if flags is None else flags
    digest = hashlib.sha256()
    for part in (source.read_bytes(), _cpu_flags().encode(), torch.__version__.encode()):
        digest.update(part)
    digest.update(" ".join(flags).encode())
    return f"{_family(source)}_{digest.hexdigest()[:12]}"


def _family(source: Path) -> str:
    """A kernel's build name without the digest of its source, flags, CPU and torch."""
    return f"swiftwriter_{_STEMS.get(source.name, source.stem)}"


# the build names' stems: the tree kernel keeps the name its builds always had
_STEMS = {SOURCE.name: "tree"}


def _off(variable: str) -> bool:
    return os.environ.get(variable, "").strip().lower() in ("0", "off", "no", "false")


def disabled() -> bool:
    return _off(DISABLE_ENV)


def pair_build() -> bool:
    """Whether the loaded build reads bfloat16 key pairs (a CPU with AVX512-BF16), and they
    are not switched off."""
    return tree_attention() is not None and not _off(PAIRS_ENV) and _loaded["module"].pair_keys()


def tiles() -> bool:
    """Whether the loaded build sums bfloat16 pairs with AMX tiles (a CPU with amx_bf16 that
    Linux lends them on; for head sizes of whole 32s)."""
    return pair_build() and _loaded["module"].tiles()


def pair_keys(dtype: torch.dtype, head_dim: int) -> bool:
    """Whether a model's keys go to the kernel as bfloat16 pairs (`key_tiles(pairs=True)`):
    a bfloat16 model with an even head size on a pair build."""
    return dtype == torch.bfloat16 and head_dim % 2 == 0 and pair_build()


def tree_attention():
    """The kernel's function (q, key_tiles, values, prefix, paths, lengths, scale) -> float32
    [rows, heads, dim], or None when it cannot be used here (`unavailable()` says why)."""
    if disabled():
        return None
    if "module" in _loaded:
        return _loaded["module"].tree_attention
    if "error" in _loaded:
        return None
    try:
        module = _build()
        _self_check(module)
    except Exception as exc:  # no compiler, a failed build, a wrong result: fall back
        error = f"{type(exc).__name__}: {exc}".strip()
        if "distrusted" in _loaded:
            error = f"{_loaded['distrusted']}, and building it again failed: {error}"
        _loaded["error"] = error[:800]
        # the log file keeps it; the writer gets one line, once (the error is remembered)
        log.info("tree-attention kernel unavailable: %s", _loaded["error"])
        logs.say(log, notice())
        return None
    _loaded["module"] = module
    _loaded["name"] = getattr(module, "__name__", "native")
    if "distrusted" in _loaded:
        logs.say(log, f"tree-attention kernel: {_loaded['distrusted']}; built it again")
    return module.tree_attention


def forest_attention():
    """The kernel's several-part function (q, shared key tiles, shared values, shared keys,
    [part key tiles], [part values], [part prefixes], [part rows], paths, lengths, scale) ->
    float32 [rows, heads, dim], for float32 models; None where the kernel is not loaded."""
    if tree_attention() is None:
        return None
    return getattr(_loaded["module"], "forest_attention", None)


def append_rows():
    """The kernel's writer of one new float32 row per part (keys, values, key tiles), or None."""
    if tree_attention() is None:
        return None
    return getattr(_loaded["module"], "append_rows", None)


def append_bf16():
    """The kernel's writer of a pass's float32 rows into a bfloat16 cache (keys, values, key
    pair tiles), or None."""
    if tree_attention() is None:
        return None
    return getattr(_loaded["module"], "append_bf16", None)


def attend_entry():
    """A capsule holding the kernel's one-layer attention over a bfloat16 or float32 cache
    (its rows appended, then `tree_attention`), for quant_linear.cpp's layer stack; or None."""
    if tree_attention() is None:
        return None
    entry = getattr(_loaded["module"], "attend_entry", None)
    return None if entry is None else entry()


_extensions: dict[str, object] = {}  # source name -> the built module, or the error's text
_rebuilt: dict[str, str] = {}  # an extension's `_family` -> the untrusted build it replaced


def extension(source_name: str):
    """Another kernel source of this package (e.g. quant_linear.cpp), built and loaded as the
    tree kernel is (same compiler flags, cache and builder lock); None when it cannot be built
    here (`extension_error` says why, and the writer is told once)."""
    if disabled():
        return None
    found = _extensions.get(source_name)
    if found is not None:
        return None if isinstance(found, str) else found
    source = SOURCE.with_name(source_name)
    try:
        module = _build(source)
    except Exception as exc:  # no compiler, a failed build: the caller falls back
        _extensions[source_name] = f"{type(exc).__name__}: {exc}".strip()[:500]
        log.info("%s unavailable: %s", source_name, _extensions[source_name])
        return None
    _extensions[source_name] = module
    replaced = _rebuilt.pop(_family(source), None)
    if replaced:
        logs.say(log, f"{source.stem} kernel: {replaced}; built it again")
    return module


def extension_error(source_name: str) -> str | None:
    found = _extensions.get(source_name)
    return found if isinstance(found, str) else None


def identity() -> str | None:
    """The loaded build's name (its source, flags, CPU and torch): measurements of passes
    taken with another build of the kernel are not reused. None without the kernel."""
    if tree_attention() is None:
        return None
    return str(_loaded["name"]) + ("+pairs" if pair_build() else "") + ("+amx" if tiles() else "")


def unavailable() -> str | None:
    """Why the kernel is not used (None when it is, or has not been asked for yet)."""
    if disabled():
        return f"switched off ({DISABLE_ENV}=0)"
    return _loaded.get("error")  # type: ignore[return-value]


def notice() -> str | None:
    """One line for the writer when the kernel could not be built (None otherwise): why, and
    what it costs; the app shows it when a model is ready, the CLI prints it once."""
    error = _loaded.get("error")
    if not error or disabled():
        return None
    first = str(error).strip().splitlines()[0] if str(error).strip() else "unknown error"
    return (
        f"tree-attention kernel unavailable ({first}); tree passes use PyTorch's attention "
        "(exact, slower)"
    )


def find_ninja() -> str | None:
    """The ninja that PyTorch's extension builder runs: on PATH, else the one the `ninja`
    package installed beside this Python (a venv used without activating it)."""
    found = shutil.which("ninja")
    if found:
        return found
    candidates = [Path(sys.prefix) / "bin" / "ninja", Path(sys.executable).parent / "ninja"]
    with contextlib.suppress(Exception):
        import ninja  # lazy: optional, PATH may have one

        candidates.insert(0, Path(ninja.BIN_DIR) / "ninja")
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _compiler() -> str | None:
    """The C++ compiler the builder will call (CXX, else c++), or None when absent."""
    name = (os.environ.get("CXX") or "c++").split()
    return shutil.which(name[0]) if name else None


@contextlib.contextmanager
def _ninja_on_path():
    """ninja's folder on PATH while building (the builder calls it by name)."""
    ninja = find_ninja()
    before = os.environ.get("PATH")
    if ninja is not None and str(Path(ninja).parent) not in (before or "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join(filter(None, [str(Path(ninja).parent), before]))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = before


_NO_COMPILER = "no C++ compiler: {} not found; install g++ (Debian/Ubuntu: build-essential)"


def _build(source: Path = SOURCE):
    """The build, with ninja reachable; one that fails for want of a compiler or of ninja
    says so (a build made earlier loads without them)."""
    built = any(
        (build_dir() / _name(flags, source) / f"{_name(flags, source)}.so").is_file()
        for flags in ([*_flags(), *OPENMP], _flags())
    )
    if not built and _compiler() is None:  # before the builder's own warnings
        raise OSError(_NO_COMPILER.format(os.environ.get("CXX") or "c++"))
    try:
        with _ninja_on_path():
            return _build_threaded(source)
    except Exception as exc:
        if _compiler() is None:
            raise OSError(_NO_COMPILER.format(os.environ.get("CXX") or "c++")) from exc
        if find_ninja() is None:
            raise OSError("ninja not found: pip install ninja") from exc
        raise


def _build_threaded(source: Path = SOURCE):
    """The threaded build, or where that fails (no OpenMP) the serial one."""
    try:
        return _build_with([*_flags(), *OPENMP], list(OPENMP), source)
    except Exception as exc:
        log.info("%s: no OpenMP build (%s), building it serial", source.name, exc)
        return _build_with(_flags(), [], source)


def _build_with(cflags: list[str], ldflags: list[str], source: Path = SOURCE):
    from torch.utils.cpp_extension import load  # lazy: PyTorch's extension builder, only to build

    name = _name(cflags, source)
    directory = _own_build_dir() / name
    with _one_builder(directory):
        _distrust_planted(directory / f"{name}.so")
        module = load(
            name=name,
            sources=[str(source)],
            extra_cflags=list(cflags),  # copies: the builder appends to what it is given
            extra_ldflags=list(ldflags),
            build_directory=str(directory),
            verbose=False,
        )
        _record(directory / f"{name}.so")
        return module


def _own_build_dir() -> Path:
    """The kernels' folder, made for this user alone (0700). One an earlier version made under
    umask 000 is closed to others (what it holds is checked before anything is loaded); one
    that is not this user's own is never built in nor loaded from."""
    folder = paths.own_folder(build_dir())
    if hasattr(os, "geteuid"):
        info = os.lstat(folder)
        if stat.S_ISLNK(info.st_mode) or info.st_uid != os.geteuid():
            raise OSError(f"{folder} is not this user's own folder: no kernel is loaded from it")
        if info.st_mode & 0o077:
            os.chmod(folder, 0o700)
    return folder


def _distrust_planted(library: Path) -> None:
    """A build found in the kernel's folder is loaded only when no other user can have written
    it and it is the very file this program's build recorded (its SHA-256, kept beside it).
    Otherwise the folder is emptied for the builder to make it again, and one line says so
    once the build has ended (in the notice where it failed)."""
    directory = library.parent
    if not os.path.lexists(directory):
        paths.own_folder(directory)
        return
    why = paths.unsafe_to_load(library if os.path.lexists(library) else directory, build_dir())
    if why is None and os.path.lexists(library):
        why = _unrecorded(library)
    if why is None:
        return
    log.info("%s not loaded (%s)", library, why)
    family = library.name.rsplit("_", 1)[0]  # the build's name without its digest
    if family == _family(SOURCE):
        _loaded.setdefault("distrusted", f"{library} was not loaded ({why})")
    else:  # another kernel's (extension): said when it has been built again
        _rebuilt.setdefault(family, f"{library} was not loaded ({why})")
    if directory.is_symlink():
        directory.unlink()
    else:
        shutil.rmtree(directory)
    paths.own_folder(directory)


def _checksum_file(library: Path) -> Path:
    return library.with_name(library.name + ".sha256")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _recorded(library: Path) -> str | None:
    try:
        return _checksum_file(library).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _unrecorded(library: Path) -> str | None:
    """Why `library` is not the file this program's build recorded, or None when it is."""
    recorded = _recorded(library)
    if recorded is None:
        return "no checksum was recorded when it was built"
    return None if recorded == _sha256(library) else "it is not the file that was built"


def _record(library: Path) -> None:
    """After a build: the library this user's alone, and its SHA-256 kept beside it."""
    os.chmod(library, 0o700)  # the linker's mode passes through the umask (0777 with 000)
    digest = _sha256(library)
    if _recorded(library) != digest:
        record = _checksum_file(library)
        partial = record.with_name(record.name + ".partial")
        partial.write_text(digest + "\n", encoding="ascii")
        os.replace(partial, record)


# how long a process waits for another one's build of the same kernel (a build takes about a
# minute on two cores) before it gives up and uses PyTorch's attention
BUILD_WAIT_S = 600.0


@contextlib.contextmanager
def _one_builder(directory: Path, wait_s: float | None = None):
    """One process at a time loads or builds a kernel folder, under a lock the OS drops when
    its holder dies. Why: PyTorch's builder marks its work with a `lock` file and waits, for
    ever, while one exists; a build killed halfway (the app closed, a Ctrl-C) leaves it behind
    and every later start would hang. Whoever holds this lock knows no live process is
    building, so a `lock` file found then is a dead build's and is removed."""
    wait_s = BUILD_WAIT_S if wait_s is None else wait_s
    try:
        import fcntl  # lazy: optional, POSIX only
    except ImportError:  # Windows: no advisory locks; a lock file an hour old is a dead build's
        _remove_stale_baton(directory, older_than_s=3600.0)
        yield
        return
    # closing the file releases the lock
    with open(directory.parent / f"{directory.name}.builder", "a+") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(
                        f"another SwiftWriter process has been building the kernel for over "
                        f"{wait_s:.0f} s"
                    ) from None
                time.sleep(0.2)
        _remove_stale_baton(directory, older_than_s=0.0)
        yield


def _remove_stale_baton(directory: Path, older_than_s: float) -> None:
    baton = directory / "lock"
    with contextlib.suppress(OSError):
        if time.time() - baton.stat().st_mtime >= older_than_s:
            baton.unlink()
            log.info("tree-attention kernel: removed a killed build's lock file %s", baton)


def key_tiles(keys: torch.Tensor, tile: int = 16, pairs: bool = False) -> torch.Tensor:
    """keys [heads, length, dim] -> the kernel's layout [heads, ceil(length/16), dim, 16] in
    float32 (key j of a head at [j // 16, :, j % 16]); padding keys are zero. `pairs`:
    bfloat16 [heads, blocks, dim / 2, 16, 2] (dims 2i and 2i + 1 of key j at
    [j // 16, i, j % 16])."""
    heads, length, dim = keys.shape
    blocks = -(-length // tile)
    padded = keys.new_zeros(
        heads, blocks * tile, dim, dtype=torch.bfloat16 if pairs else torch.float32
    )
    padded[:, :length] = keys
    if pairs:
        return padded.view(heads, blocks, tile, dim // 2, 2).permute(0, 1, 3, 2, 4).contiguous()
    return padded.view(heads, blocks, tile, dim).transpose(2, 3).contiguous()


def _self_check(module) -> None:
    """The built kernel against PyTorch's attention on a small tree (a miscompiled build, or
    one for another CPU, must not write text); its bfloat16 pairs too, where it has them."""
    _check_against_sdpa(module.tree_attention, torch.float32, 1e-5, 1e-4)
    if module.pair_keys():  # bfloat16 inputs and probabilities: bfloat16's own precision
        _check_against_sdpa(module.tree_attention, torch.bfloat16, 2e-3, 1e-2)


def _check_against_sdpa(fn, dtype: torch.dtype, atol: float, rtol: float) -> None:
    gen = torch.Generator().manual_seed(0)
    hk, g, d, prefix = 2, 3, 64, 37
    keys = torch.randn(hk, prefix + 3, d, generator=gen).to(dtype)
    values = torch.randn(1, hk, prefix + 3, d, generator=gen).to(dtype)
    q = torch.randn(3, hk * g, d, generator=gen).to(dtype)
    paths = torch.tensor([[0, 0], [0, 1], [0, 2]], dtype=torch.int32)
    lens = torch.tensor([1, 2, 2], dtype=torch.int32)
    tiles = key_tiles(keys, pairs=dtype == torch.bfloat16)
    got = fn(q, tiles, values, prefix, paths, lens, 0.125)
    for row in range(3):
        idx = list(range(prefix)) + [prefix + int(s) for s in paths[row, : int(lens[row])]]
        k = keys[:, idx][None].float()
        v = values[:, :, idx].float()
        want = torch.nn.functional.scaled_dot_product_attention(
            q[row].float().view(1, hk * g, 1, d), k, v, scale=0.125, enable_gqa=True
        )[0, :, 0]
        if not torch.allclose(got[row], want, atol=atol, rtol=rtol):
            raise RuntimeError(f"the built kernel disagrees with PyTorch's attention ({dtype})")


def main() -> None:
    """Build now (the Makefile's set-up step); never fails the set-up, says what it got."""
    logging.basicConfig(level=logging.INFO)
    if tree_attention() is not None:
        print("tree-attention kernel: ready")
    elif notice() is None:  # a failed build has said why already (tree_attention)
        print(f"tree-attention kernel: unavailable ({unavailable()})")
    source = "quant_linear.cpp"
    built = extension(source) is not None
    print(f"GGUF-block kernel: {'ready' if built else f'unavailable ({extension_error(source)})'}")

"""llama.cpp's plain decoding on the same GGUF file, timed beside ours (`bench --methods
llamacpp,ar,tokenswift`): what a writer's other tools (KoboldCpp, LM Studio, Ollama) run.

Through llama-cpp-python (the `compare` extra: `pip install -e ".[compare]"` or `make
compare`, which compiles llama.cpp on this machine; it is not part of the tests). The same
file, prompt ids, thread count and sampling settings: greedy (temperature 0) or the preset's
temperature, top-p and min-p, with the repetition penalty over the same window (llama.cpp's
penalty divides a positive logit and multiplies a negative one, as ours does). DRY is not in
llama-cpp-python's sampler chain, so a Creative run of llama.cpp samples without it (it costs
llama.cpp nothing it would otherwise pay). Its text is its own: llama.cpp rounds differently,
so rows are compared by speed, never by text.

Timed as ours are: the wall clock around the whole call, prompt evaluation included. On CPUs
with AMX, llama.cpp 0.3.36 was seen to crash (SIGSEGV) evaluating a prompt in batches of
quantized weights; there the prompt is evaluated one token at a time, which the row says."""

from __future__ import annotations

import time
from pathlib import Path

from swiftwriter.engine.decoding.settings import SamplingSettings

INSTALL = 'pip install -e ".[compare]" (or make compare): it compiles llama.cpp'


def unavailable() -> str:
    """Why llama.cpp cannot run here ("" when it can)."""
    try:
        import llama_cpp  # noqa: F401  # lazy: optional llama_cpp
    except ImportError:
        return f"llama-cpp-python is not installed: {INSTALL}"
    except Exception as exc:  # noqa: BLE001 - a broken build: one line
        return f"llama-cpp-python does not load: {exc}"
    return ""


def _amx() -> bool:
    try:
        return " amx_" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


class LlamaCpp:
    """One llama.cpp model, loaded once for the bench's runs on it."""

    def __init__(self, path: Path, context: int, threads: int):
        from llama_cpp import Llama  # lazy: optional llama_cpp

        self.one_by_one = _amx()
        self.threads = threads
        self.context = context
        self.llm = Llama(
            model_path=str(path), n_ctx=context, n_threads=threads, n_threads_batch=threads,
            n_batch=1 if self.one_by_one else 512, n_ubatch=1 if self.one_by_one else 512,
            last_n_tokens_size=1024, verbose=False,
        )  # fmt: skip

    def note(self) -> str:
        how = "prompt one token at a time (AMX)" if self.one_by_one else "prompt in batches"
        return f"llama.cpp {self.version()} on {self.threads} threads, {how}"

    @staticmethod
    def version() -> str:
        import llama_cpp  # lazy: optional llama_cpp

        return getattr(llama_cpp, "__version__", "?")

    def generate(self, prompt: list[int], n: int, sampling: SamplingSettings):
        """(the n token ids written, seconds, [(tokens so far, seconds)])."""
        self.llm.last_n_tokens_size = sampling.window
        self.llm.set_seed(sampling.seed if sampling.seed is not None else 0)
        options = dict(
            repeat_penalty=sampling.penalty,
            temp=0.0 if sampling.greedy else sampling.temperature,
            top_k=sampling.top_k if not sampling.greedy else 1,
            top_p=sampling.top_p,
            min_p=sampling.min_p,
        )
        out, times = [], []
        start = time.perf_counter()
        for token in self.llm.generate(prompt, reset=True, **options):
            out.append(int(token))
            times.append((len(out), time.perf_counter() - start))
            if len(out) >= n:
                break
        return out, time.perf_counter() - start, times

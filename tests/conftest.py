"""Shared fixtures: tiny random Llama / Qwen2 models (built at test time, fixed seeds), a
tiny-vocabulary model for statistical tests, and the real default model for the few tests that
need it. Tests never reach the network."""

from __future__ import annotations

import os

import pytest

from tests import isolation

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Before anything of SwiftWriter is imported: the writer's own data, config and state folders
# are listed now and compared at the end of the session, and every test (and child process)
# uses temporary ones instead (the cache too).
REAL_FOLDERS = isolation.real_folders()
REAL_BEFORE = isolation.snapshot(isolation.guarded(REAL_FOLDERS))
TEST_ROOT = isolation.redirect(REAL_FOLDERS)


def pytest_sessionfinish(session, exitstatus):
    """Fail the session if any test wrote into the writer's real folders."""
    changed = isolation.changes(REAL_BEFORE, isolation.snapshot(isolation.guarded(REAL_FOLDERS)))
    if changed:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = ["Tests wrote outside their temporary folders:", *changed[:40]]
        if reporter:
            reporter.write_line("\n".join(lines), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def build_tiny(
    arch: str = "llama",
    vocab: int = 256,
    seed: int = 0,
    hidden: int = 32,
    layers: int = 2,
    max_positions: int = 1024,
):
    """A tiny random causal LM in fp32; the same seed gives the same weights."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    common = dict(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=None,
        tie_word_embeddings=False,
    )
    config = LlamaConfig(**common) if arch == "llama" else Qwen2Config(**common)
    config._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    # Sharper logits than the default init, so tiny models have real preferences and near-ties
    # stay rare; still random and fully determined by the seed.
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)
    model.eval()
    return model


def _on_one_thread():
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def one_thread():
    """Tiny models on one thread: on two busy cores, threads that wait for each other cost far
    more than the arithmetic (a row's bits do not depend on the thread count)."""
    yield from _on_one_thread()


TINY_MODELS = {"tiny_llama", "tiny_qwen2", "tiny_vocab_model"}


@pytest.fixture(autouse=True)
def _tiny_models_on_one_thread(request):
    """Every test of a tiny model runs on one thread (see one_thread): 300 sampled takes of
    the 16-token model took 2.3 s on one thread, 8.9 s on two beside another process."""
    if TINY_MODELS.isdisjoint(request.fixturenames):
        yield
        return
    yield from _on_one_thread()


@pytest.fixture(scope="session")
def tiny_llama():
    return build_tiny("llama", seed=1)


@pytest.fixture(scope="session")
def tiny_qwen2():
    return build_tiny("qwen2", seed=2)


@pytest.fixture(scope="session")
def tiny_vocab_model():
    """16 token ids: cheap to sample thousands of times for distribution tests."""
    return build_tiny("llama", vocab=16, seed=3)


@pytest.fixture(scope="session")
def default_model():
    """The real default model, converted by the set-up (`make test` provisions it)."""
    from swiftwriter.modelstore import loader, registry

    entry = registry.default_entry()
    if not entry.is_ready():
        from swiftwriter.modelstore import auto_convert

        auto_convert.convert(entry)
    return loader.load(entry, device="cpu", dtype="float32")


def run_as_user(code: str, *args: str):
    """Run python `code` in a child where file modes apply: as root, the child drops the
    capabilities that override them (setpriv); an ordinary user needs nothing dropped."""
    import os
    import subprocess
    import sys

    command = [sys.executable, "-c", code, *args]
    if os.geteuid() == 0:
        caps = "-dac_override,-dac_read_search,-fowner"
        command = ["setpriv", "--bounding-set", caps, "--inh-caps", caps, *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)

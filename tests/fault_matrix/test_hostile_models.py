"""Fault matrix rows: hostile model files given to `swiftwriter models add` and `generate`, each
run in a child process under an address-space ceiling and a time bound, and measured against a
benign run of the same command (common.py's trials): refused in one line naming the file and
the limit, within 10 s and 500 MB above the benign run, with nothing written."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.fault_matrix.common import Trial, child_env, cli_trial, within_budget
from tests.modelstore import hostile_models
from tests.modelstore.tiny_gguf import tiny_model, write_gguf

HOSTILE_S = 15  # an unbounded read on the old code is stopped here (the budget is 10 s)
BENIGN_S = 180  # a baseline is not under test: on a busy machine it may take its time


@pytest.fixture(scope="module")
def tiny():
    return tiny_model()


def _added(root: Path, *args: str) -> Trial:
    trial = cli_trial(child_env(root), "models", "add", *args, timeout=BENIGN_S)
    assert trial.returncode == 0, trial.stderr
    return trial


@pytest.fixture(scope="module")
def benign_gguf(tmp_path_factory, tiny) -> Trial:
    """`models add` of a tiny valid GGUF: converted and registered."""
    root = tmp_path_factory.mktemp("benign-gguf")
    path = write_gguf(root / "tiny.gguf", tiny)
    return _added(root, "tiny", str(path), "--dtype", "float32")


def nothing_written(env: dict) -> None:
    models = Path(env["SWIFTWRITER_MODELS_DIR"])
    assert not models.exists() or not list(models.iterdir()), list(models.iterdir())
    assert not (Path(env["SWIFTWRITER_CONFIG_DIR"]) / "models.toml").exists()


def refused_add(env: dict, path: Path, benign: Trial, expect: str, name: str = "mine") -> Trial:
    hostile = cli_trial(env, "models", "add", name, str(path), timeout=HOSTILE_S)
    within_budget(hostile, benign, expect)
    assert hostile.returncode == 1
    nothing_written(env)
    return hostile


def test_an_array_declared_at_2_to_the_62_elements(env, tmp_path, benign_gguf):
    """The issue's reproduction to the byte: a uint8 array of 2^62 elements in 97 bytes (the
    reader grew 110 MB/s, 3.16 GB in 28 s)."""
    s = lambda b: struct.pack("<Q", len(b)) + b  # noqa: E731
    path = tmp_path / "b.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + s(b"general.architecture")
                     + struct.pack("<I", 8) + s(b"llama") + s(b"junk") + struct.pack("<I", 9)
                     + struct.pack("<IQ", 0, 1 << 62))  # fmt: skip
    refused_add(
        env, path, benign_gguf, "b.gguf: metadata 'junk' declares 4,611,686,018,427,387,904"
    )


def test_a_real_array_of_20_million_elements(env, tmp_path, benign_gguf):
    """20 MB that are really there, past any metadata a model needs (over 6 GB before)."""
    path = hostile_models.declared_array(tmp_path / "big.gguf", 20_000_000, bytes(20_000_000))
    refused_add(env, path, benign_gguf, "big.gguf: metadata 'junk' holds 20,000,000 elements")


def test_a_vocabulary_of_3_million_tokens(env, tmp_path, benign_gguf):
    """A 60 MB file that took 6.47 GB and left a .partial folder behind."""
    path = hostile_models.vocabulary(tmp_path / "vocab.gguf", 3_000_000)
    refused_add(env, path, benign_gguf, "vocab.gguf: a vocabulary of 3,000,000 tokens")


def test_tensors_laid_over_each_other(env, tmp_path, benign_gguf, tiny):
    """Every tensor at offset 0: accepted and converted before."""
    path = hostile_models.overlapping(tmp_path / "overlap.gguf", tiny)
    refused_add(env, path, benign_gguf, "overlap.gguf: tensor 'blk.0.ffn_norm.weight' overlaps")


def test_an_architecture_that_is_not_utf8(env, tmp_path, benign_gguf, tiny):
    """Said to be 'truncated' (or to state no architecture) before."""
    path = hostile_models.non_utf8_architecture(tmp_path / "arch.gguf", tiny)
    refused_add(env, path, benign_gguf, "arch.gguf: general.architecture is not UTF-8 text")


def test_a_250_character_name_is_refused_before_the_file_is_read(env, tmp_path, benign_gguf, tiny):
    """The whole file was converted before the name failed as a folder name."""
    path = write_gguf(tmp_path / "fine.gguf", tiny)
    hostile = refused_add(env, path, benign_gguf, "at most", name="m" * 250)
    assert "m" * 250 not in hostile.stderr  # the line stays readable


# -- a model folder whose config.json declares far more than this machine holds ---------------
GENERATE = ("--max-new-tokens", "2", "--device", "cpu", "--dtype", "float32",
            "--preset", "precise")  # fmt: skip
# PyTorch's attention: the first generate of a session would otherwise build the native kernel
# (a minute, and the compiler's memory in the baseline); a refusal never reaches it.
NO_KERNEL = {"SWIFTWRITER_NATIVE": "0"}


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    from tests.commands.tiny_cli import word_tokenizer_folder
    from tests.conftest import build_tiny

    folder = tmp_path_factory.mktemp("tiny-folder") / "tiny-model"
    build_tiny("llama", seed=3).save_pretrained(folder)
    word_tokenizer_folder(folder)
    (folder.parent / "prompt.txt").write_text("the sea rose and fell at night")
    return folder


@pytest.fixture(scope="module")
def benign_folder(tmp_path_factory, tiny_folder) -> Trial:
    """`models add` of a tiny model folder: registered."""
    return _added(tmp_path_factory.mktemp("benign-folder"), "tiny", str(tiny_folder))


@pytest.fixture(scope="module")
def benign_generate(tmp_path_factory, tiny_folder) -> Trial:
    """`generate` of two tokens with a tiny model folder."""
    env = {**child_env(tmp_path_factory.mktemp("benign-generate")), **NO_KERNEL}
    prompt = tiny_folder.parent / "prompt.txt"
    trial = cli_trial(env, "generate", "--prompt-file", str(prompt), "--model", str(tiny_folder),
                      *GENERATE, timeout=BENIGN_S)  # fmt: skip
    assert trial.returncode == 0, trial.stderr
    return trial


def test_a_config_larger_than_this_machine_is_refused_when_added(env, tmp_path, benign_folder):
    folder = hostile_models.oversized_folder(tmp_path / "huge")
    refused_add(env, folder, benign_folder, f"{folder / 'config.json'}: its weights need")


def test_a_config_larger_than_this_machine_is_refused_before_it_loads(
    env, tmp_path, tiny_folder, benign_generate
):
    """Killed by the operating system without a word before."""
    folder = hostile_models.oversized_folder(tmp_path / "huge")
    prompt = tiny_folder.parent / "prompt.txt"
    args = ("generate", "--prompt-file", str(prompt), "--model", str(folder), *GENERATE)
    hostile = cli_trial({**env, **NO_KERNEL}, *args, timeout=HOSTILE_S)
    within_budget(hostile, benign_generate, f"{folder / 'config.json'}: its weights need")
    assert hostile.returncode == 1 and not hostile.stdout
    nothing_written(env)

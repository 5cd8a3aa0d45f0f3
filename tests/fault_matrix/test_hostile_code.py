"""Fault matrix rows: code that comes with a model or sits in the cache, run through the CLI in a
child under a memory ceiling and a time bound (`common.cli_trial`), against a benign run of
the same command: a planted kernel, a chat template that would take all memory or never end,
a tokenizer whose regex engine panics. Each is refused or survived within the budget, in one
line beyond what the benign run says, with nothing written."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from swiftwriter.engine.passes import native
from swiftwriter.store import Project

from tests.conftest import build_tiny
from tests.fault_matrix.common import Trial, cli_trial, digest, within_budget

BENIGN = "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
WORDS = ["<s>", "</s>", "<unk>", *(f"w{i}" for i in range(3, 256))]


def model_folder(folder: Path, template: str = BENIGN, split: str | None = None) -> Path:
    """A tiny model with a word-level tokenizer and `template` as its chat template; `split`:
    a regex its pre-tokenizer splits on (instead of whitespace)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    core.pre_tokenizer = (pre_tokenizers.Whitespace() if split is None
                          else pre_tokenizers.Split(Regex(split), "isolated"))  # fmt: skip
    build_tiny(layers=1).save_pretrained(folder)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    tokenizer.chat_template = template
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def stage(tmp_path_factory):
    """A project, a child environment of the rows' own (the kernel off: they never need it),
    the tiny model, and the benign run of `generate --show-context` they are measured against.
    The document's 'aaa...ab' is what makes the panicking tokenizer's regex give up."""
    root = tmp_path_factory.mktemp("stage")
    env = {**os.environ, "SWIFTWRITER_DATA_DIR": str(root / "data"),
           "SWIFTWRITER_MODELS_DIR": str(root / "data" / "models"),
           "SWIFTWRITER_CONFIG_DIR": str(root / "config"),
           "SWIFTWRITER_LOG_DIR": str(root / "logs"), native.DISABLE_ENV: "0"}  # fmt: skip
    project = root / "Novel.swiftwriter"
    with Project.create(project, title="Novel") as p:
        p.add_document("Chapter 1", "w5 w6 " + "a" * 100 + "b")
    model = model_folder(root / "tiny")
    benign = show_context(env, project, model, timeout=120)  # the baseline has no bound
    assert benign.returncode == 0, benign.stderr
    return SimpleNamespace(env=env, project=project, model=model, benign=benign)


def with_template(model: Path, folder: Path, template: str) -> Path:
    shutil.copytree(model, folder)
    (folder / "chat_template.jinja").write_text(template)
    return folder


def beyond(hostile: Trial, benign: Trial) -> Trial:
    """The hostile run with only the lines of stderr the benign run did not print (the
    precision and drafter lines every `generate` prints)."""
    said = set(benign.stderr.splitlines())
    lines = [line for line in hostile.stderr.splitlines() if line not in said]
    return dataclasses.replace(hostile, stderr="\n".join(lines))


def show_context(env, project: Path, model: Path, **bounds) -> Trial:
    args = ("generate", str(project), "Chapter 1", "--model", str(model), "--dtype", "float32",
            "--direction", "x", "--show-context")  # fmt: skip
    return cli_trial(env, *args, **bounds)


def refused_within_budget(stage, model: Path, expect: str) -> Trial:
    before = digest(stage.project)
    hostile = show_context(stage.env, stage.project, model)
    within_budget(beyond(hostile, stage.benign), stage.benign, expect=expect)
    assert hostile.returncode == 1 and digest(stage.project) == before
    return hostile


@pytest.mark.parametrize(
    "template, limit",
    [
        # 4.2 GB and 43 s before (3 GiB in 4.6 s with 6000000000), folded while compiling
        ("{{ 'x' * 2000000000 }}", r"would make 2,000,000,000 characters \(limit [\d,]+\)"),
        # killed at 30 s before: never ends
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
         "took more than 1,000,000 steps|ran for more than 1 s"),
    ],
    ids=["constant-folded-bomb", "nested-ranges"],
)  # fmt: skip
def test_a_chat_template_that_would_take_all_memory_or_hang(stage, tmp_path, template, limit):
    model = with_template(stage.model, tmp_path / "hostile", template + BENIGN)
    hostile = refused_within_budget(stage, model, f"The chat template of {model} was stopped")
    assert re.search(limit, hostile.stderr), hostile.stderr


def test_a_tokenizer_whose_regex_panics(stage, tmp_path):
    model = model_folder(tmp_path / "panics", split="(a+)+$")
    # before: 127 lines (Rust's backtrace, then Python's), exit 1
    hostile = refused_within_budget(stage, model, "retry-limit-in-match over")
    assert f"swiftwriter: The tokenizer of {model} failed on this text: " in hostile.stderr


# The planted kernel: a shared object whose constructor writes a marker file when the process
# loads it (it needs no Python module in it: loading it is enough).
PLANTED = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void planted(void) {
    const char *marker = getenv("PLANTED_MARKER");
    FILE *f = marker ? fopen(marker, "w") : NULL;
    if (f) { fputs("the planted kernel ran\n", f); fclose(f); }
}
"""
# A C++ compiler that answers questions about itself and compiles nothing: with FAKE_LINK set
# its link step makes the planted object, so that PyTorch's builder leaves a whole build in
# the cache (its build file, its log) with the planted object as its output, as a kernel
# copied over a real build and touched; without it every compile fails at once (a real
# rebuild takes a minute).
FAKE_CXX = """#!/bin/sh
out=""; deps=""; prev=""
for a in "$@"; do
  [ "$prev" = "-o" ] && out="$a"; [ "$prev" = "-MF" ] && deps="$a"; prev="$a"
done
case " $* " in
  *" -c "*) [ -n "$FAKE_LINK" ] && : > "$out" && echo "$out:" > "$deps" && exit 0
            echo "no compiling here" >&2; exit 1;;
  *" -shared "*) [ -n "$FAKE_LINK" ] && cp "$FAKE_LINK" "$out" && exit 0; exit 1;;
esac
exec "$REAL_CXX" "$@"
"""


def kernel_env(tmp_path: Path, env: dict) -> dict:
    """An environment whose C++ compiler is the fake one above."""
    cxx = shutil.which("c++")
    if shutil.which("cc") is None or cxx is None:
        pytest.skip("no C compiler to make the planted object")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "c++").write_text(FAKE_CXX)
    (tools / "c++").chmod(0o755)
    env = {**env, "REAL_CXX": cxx, "PATH": f"{tools}{os.pathsep}{env['PATH']}"}
    env.pop("CXX", None)
    env.pop(native.DISABLE_ENV, None)
    return env


def plant_kernel(tmp_path: Path, env: dict) -> None:
    """The kernel's build in env's cache made with the planted object as its library."""
    planted = tmp_path / "planted.so"
    (tmp_path / "planted.c").write_text(PLANTED)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(planted), str(tmp_path / "planted.c")],
                   check=True)  # fmt: skip
    flags = [*native._flags(), *native.OPENMP]
    directory = Path(env["SWIFTWRITER_CACHE_DIR"]) / "native" / native._name(flags)
    build = textwrap.dedent(f"""
        from torch.utils.cpp_extension import load
        try:
            load(name={directory.name!r}, sources=[{str(native.SOURCE)!r}],
                 extra_cflags={flags!r}, extra_ldflags={list(native.OPENMP)!r},
                 build_directory={str(directory)!r})
        except ImportError:  # no module in it: the planted object was made and loaded
            pass
    """)
    directory.mkdir(parents=True)
    made = subprocess.run([sys.executable, "-c", build], env={**env, "FAKE_LINK": str(planted)},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert (directory / f"{directory.name}.so").read_bytes() == planted.read_bytes(), made.stderr


def test_a_planted_kernel_is_never_loaded(env, stage, tmp_path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("w5 w6 w7 w8 w9")
    args = ("generate", "--prompt-file", str(prompt), "--model", str(stage.model),
            "--dtype", "float32", "--max-new-tokens", "4")  # fmt: skip
    env = kernel_env(tmp_path, env)
    # the same run without a kernel to load (nor to build: the compiler compiles nothing),
    # which also measures the model's passes for both runs
    benign = cli_trial({**env, "SWIFTWRITER_CACHE_DIR": str(tmp_path / "empty")}, *args,
                       timeout=120)  # fmt: skip
    assert benign.returncode == 0, benign.stderr
    env = {**env, "SWIFTWRITER_CACHE_DIR": str(tmp_path / "cache")}
    plant_kernel(tmp_path, env)
    # before: the next start loaded it (its constructor ran) without a word
    hostile = cli_trial({**env, "PLANTED_MARKER": str(tmp_path / "marker")}, *args)
    assert not (tmp_path / "marker").exists(), "the planted kernel ran"
    assert hostile.returncode == 0, hostile.stderr
    within_budget(beyond(hostile, benign), benign, expect="no checksum was recorded")
    assert "tree-attention kernel unavailable" in hostile.stderr

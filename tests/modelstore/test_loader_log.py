"""A model load says in the log what a bug report needs: the folder, device and dtype (and how
`auto` chose it), the product kernel picked for this machine, and the drafter found."""

from __future__ import annotations

import logging

from swiftwriter.modelstore import loader
from swiftwriter.modelstore.registry import ModelEntry

from tests.commands.tiny_cli import word_tokenizer_folder
from tests.conftest import build_tiny


def test_a_load_logs_its_folder_dtype_kernel_and_drafter(tmp_path, caplog, one_thread):
    folder = tmp_path / "tiny"
    build_tiny("llama", seed=4).save_pretrained(folder)
    word_tokenizer_folder(folder)
    entry = ModelEntry(id="tiny-logged", name="Tiny", source="folder", path=folder)
    caplog.set_level(logging.DEBUG, logger="swiftwriter.modelstore.loader")
    loader.load(entry, device="cpu", dtype="float32")
    said = [r.getMessage() for r in caplog.records if r.name == "swiftwriter.modelstore.loader"]
    assert f"loading tiny-logged from {folder} on cpu in float32 (chosen by hand)" in said[0]
    assert any(line.startswith("product kernel for tiny-logged in float32: ") for line in said)
    # a model this small is not timed: a second or two a start would buy nothing
    assert any("(unmeasured: under 20,000,000 parameters)" in line for line in said)
    from swiftwriter.modelstore import measurements

    assert not any("tiny-logged" in key for key in measurements._read())
    assert said[-1] == "loaded tiny-logged: LlamaForCausalLM, drafter missing"

"""The families through the command line as a writer runs them: a saved tiny Gemma 3 (sliding
and full layers) and OLMo 2 folder added with `swiftwriter models add`, then `swiftwriter
bench --methods ar,tokenswift --dtype bfloat16` writes plain decoding's text; a model whose
passes are not batch-invariant says so in the precision line, as the Speed dock does."""

from __future__ import annotations

import json

import pytest
import torch
from swiftwriter.cli import main
from swiftwriter.engine import DraftSettings

from tests.commands.tiny_cli import install_tiny
from tests.conftest import build_tiny
from tests.engine.families import FAMILIES, build_family

pytestmark = pytest.mark.usefixtures("one_thread")


def save_with_tokenizer(model, folder) -> None:
    """The model and a word-level fast tokenizer over its 256 ids ('w3' is id 3)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<s>", "</s>", "<unk>", *(f"w{i}" for i in range(3, 256))]
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    model.save_pretrained(folder)
    PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    ).save_pretrained(folder)


def save_with_byte_tokenizer(model, folder) -> None:
    """The model and a byte-level BPE tokenizer without merges (one id per byte, 256 ids):
    read the same way by every family's tokenizer class, Qwen2's included (it rebuilds a
    byte-level BPE from the folder and would drop a word-level vocabulary's words)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    core = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    model.save_pretrained(folder)
    PreTrainedTokenizerFast(tokenizer_object=core, eos_token=alphabet[0]).save_pretrained(folder)


# seeds whose text repeats itself enough for the n-gram and suffix drafts to be right
@pytest.mark.parametrize("family, seed", [("gemma3", 3), ("olmo2", 5)])
def test_bench_of_an_added_family_folder_writes_plain_decodings_text(
    family, seed, tmp_path, capsys, monkeypatch
):
    from swiftwriter.engine.decoding import settings

    # every step drafts: the pace keeper would otherwise decide by timing on a busy machine
    balanced = DraftSettings(pace=False, adaptive=False)
    monkeypatch.setitem(settings.STRATEGIES, "balanced", balanced)
    folder = tmp_path / f"tiny-{family}"
    save_with_tokenizer(build_family(family, seed=seed), folder)
    assert main(["models", "add", f"tiny-{family}", str(folder)]) == 0
    prompt = tmp_path / "prompt.txt"  # phrases that repeat: the n-gram drafts are often right
    prompt.write_text(" ".join(["w5 w9 w12 w40 w7", "w88 w3 w61"][i % 2] for i in range(9)))
    out = tmp_path / "report.json"
    args = ["bench", "--model", f"tiny-{family}", "--prompt-file", str(prompt),
            "--methods", "ar,tokenswift", "--dtype", "bfloat16", "--device", "cpu",
            "--max-new-tokens", "48", "--no-heads", "--json", str(out)]  # fmt: skip
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "precision: bfloat16" in err and "may differ" not in err
    report = json.loads(out.read_text())
    tokenswift = report["methods"]["tokenswift"]
    assert report["methods"]["ar"]["tokens"] == 48
    assert tokenswift["identical_to_ar"] is True
    assert tokenswift["forward_passes"] < 48  # drafts were accepted


def test_a_model_without_invariant_passes_says_so(monkeypatch, tmp_path, capsys):
    """Rotary frequencies that change with the length (dynamic NTK scaling): no per-position
    table, so no batch-invariant pass; bench and generate say the text may differ, and why."""
    model = build_tiny("llama", seed=4)
    model.config.rope_parameters = {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4}
    model.model.rotary_emb.rope_type = "dynamic"
    install_tiny(monkeypatch, model.to(torch.bfloat16))
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("3 7 3 7 5 9 3 7 5 11 3 7")
    args = ["bench", "--prompt-file", str(prompt), "--methods", "ar,tokenswift",
            "--max-new-tokens", "8", "--no-heads"]  # fmt: skip
    assert main(args) == 0
    assert main(["generate", "--prompt-file", str(prompt), "--max-new-tokens", "4"]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "precision" in line]
    said = (
        "precision: float32 · may differ from plain decoding "
        "(LlamaDecoderLayer: its rotary frequencies change with the length)"
    )
    assert lines == [said, said]  # bench's, then generate's


def test_a_spread_model_writes_the_same_text_or_says_it_may_differ(tmp_path, capsys):
    """The issue's placement check: `generate --device-map auto --max-memory cpu=...` in
    bfloat16 writes the text of the model on one device, or its precision line says the text
    may differ and why (its offloaded layers run transformers' own forward)."""
    folder = tmp_path / "tiny-llama"
    save_with_tokenizer(build_family("llama", seed=3), folder)
    assert main(["models", "add", "tiny-llama", str(folder)]) == 0
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("w5 w9 w12 w40 w7 w88 w3 w61 w5 w9")
    capsys.readouterr()

    def generate(*placement: str) -> tuple[str, str]:
        args = ["--model", "tiny-llama", "generate", "--prompt-file", str(prompt),
                "--dtype", "bfloat16", "--max-new-tokens", "24", "--preset", "precise",
                *placement]  # fmt: skip
        assert main(args) == 0
        captured = capsys.readouterr()
        return captured.out, captured.err

    plain, plain_err = generate()
    spread, spread_err = generate("--device-map", "auto", "--max-memory", "cpu=40KiB")
    assert "may differ" not in plain_err
    assert spread.strip(), "the spread model wrote nothing"
    assert spread == plain or "may differ from plain decoding" in spread_err
    assert "spread by accelerate" in spread_err  # said, whether or not this text differed
    from swiftwriter.modelstore.placement import parse_max_memory, plan_device_map
    from transformers import AutoConfig

    planned = plan_device_map(AutoConfig.from_pretrained(folder), "bfloat16",
                              parse_max_memory("cpu=40KiB"), 64)  # fmt: skip
    assert "disk" in planned.values()  # the weights are read from disk as the passes run


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_added_as_a_folder_benches_exact_in_every_dtype(
    family, tmp_path, capsys, monkeypatch
):
    """The issue's acceptance as a writer runs it: each family's tiny folder added with
    `swiftwriter models add`, then `bench --methods ar,tokenswift` in float32, bfloat16 and
    float16, greedy and sampled: tokenswift's text is ar's (bench's own check; it exits 1
    when they differ) and no precision line says the text may differ."""
    from swiftwriter.engine.decoding import settings
    from swiftwriter.modelstore import loader

    monkeypatch.setitem(settings.STRATEGIES, "balanced", DraftSettings(pace=False, adaptive=False))
    # float16 on a CPU without its arithmetic is refused as too slow for a writer (a GPU's
    # dtype): the text it writes is what this checks, so the refusal is set aside here
    monkeypatch.setattr(loader, "check_cpu_float16", lambda entry: None)
    folder = tmp_path / family
    save_with_byte_tokenizer(build_family(family, seed=3), folder)
    assert main(["models", "add", f"tiny-{family}", str(folder)]) == 0
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("the tide came in, the tide went out; " * 3)
    capsys.readouterr()
    for dtype in ("float32", "bfloat16", "float16"):
        for sampling in (["--sampling", "greedy"], ["--sampling", "sample", "--seed", "7"]):
            out = tmp_path / f"{dtype}-{sampling[1]}.json"
            args = ["bench", "--model", f"tiny-{family}", "--prompt-file", str(prompt),
                    "--methods", "ar,tokenswift", "--dtype", dtype, "--device", "cpu",
                    "--max-new-tokens", "24", "--no-heads", *sampling, "--json", str(out)]  # fmt: skip
            assert main(args) == 0, (dtype, sampling)
            err = capsys.readouterr().err
            assert f"precision: {dtype}" in err and "may differ" not in err, err
            methods = json.loads(out.read_text())["methods"]
            assert methods["tokenswift"]["identical_to_ar"] is True, (dtype, sampling)
            assert methods["ar"]["tokens"] == 24

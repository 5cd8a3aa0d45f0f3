"""`swiftwriter models random`: a GGUF of random weights in a real shape, quantized as asked,
added like any GGUF (its weights kept as stored) and written with by `generate`; llama.cpp's
Q4_K_M mixture puts Q6_K where llama.cpp does."""

from __future__ import annotations

from pathlib import Path

from swiftwriter.bench import ggufgen
from swiftwriter.cli import main
from swiftwriter.modelstore import gguf_header, registry


def test_a_random_model_is_written_added_and_generates(user_dirs, tmp_path, capsys):
    assert main(["models", "random", "noise", "--shape", "tiny", "--type", "Q4_K_M"]) == 0
    entry = registry.load_registry()["noise"]
    assert entry.stored_dtype() == "stored" and entry.is_ready()
    header = gguf_header.read(Path(entry.file))
    kinds = {t.name: t.kind for t in header.tensors}
    assert kinds["token_embd.weight"] == "Q6_K" and kinds["blk.0.attn_q.weight"] == "Q4_K"
    assert kinds["blk.1.ffn_down.weight"] == "Q6_K"  # the last eighth of the layers: more bits
    assert kinds["blk.0.ffn_down.weight"] == "Q4_K"
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("The harbour at dawn")
    capsys.readouterr()
    args = ["generate", "--model", "noise", "--prompt-file", str(prompt), "--dtype", "stored",
            "--max-new-tokens", "6", "--preset", "precise"]  # fmt: skip
    assert main(args) == 0
    assert capsys.readouterr().out.strip()


def test_an_unknown_shape_or_type_is_one_line(user_dirs, capsys):
    assert main(["models", "random", "x", "--shape", "giant"]) == 1
    assert "Unknown shape 'giant'" in capsys.readouterr().err
    assert main(["models", "random", "x", "--shape", "tiny", "--type", "IQ2_XS"]) == 1
    assert "Unknown type 'IQ2_XS'" in capsys.readouterr().err
    assert ggufgen.mixture_type("blk.5.attn_v.weight", "Q4_K_M", 24) == "Q6_K"  # (5 - 3) % 3 == 2
    assert ggufgen.mixture_type("blk.4.attn_v.weight", "Q4_K_M", 24) == "Q4_K"

"""The issue's acceptance test: the default model's own GGUF file added as a user model with
`swiftwriter models add` keeping its weights as stored, then `generate` on it writes the same
text as the default model in the same dtype: float32 (de-quantized from the file's blocks by
the kernel, against the default's folder converted by transformers) and the blocks as stored.
(A bfloat16 folder asked for float32 converts again: test_gguf_add, on a tiny file.)"""

from __future__ import annotations

import pytest
from swiftwriter import paths
from swiftwriter.cli import main
from swiftwriter.modelstore import auto_convert, provision, registry


@pytest.mark.default_model
@pytest.mark.slow
@pytest.mark.timeout(1500)  # four loads: minutes on a busy 2-core machine
def test_the_default_models_gguf_added_writes_the_default_models_text(
    tmp_path, monkeypatch, capsys
):
    default = registry.default_entry()
    if not default.is_ready():
        auto_convert.convert(default)
    models = tmp_path / "models"  # the default model reached through a link, as the session does
    models.mkdir()
    (models / default.id).symlink_to(default.folder().resolve(), target_is_directory=True)
    monkeypatch.setenv("SWIFTWRITER_MODELS_DIR", str(models))
    monkeypatch.setenv("SWIFTWRITER_CONFIG_DIR", str(tmp_path / "config"))
    gguf = provision.locate_gguf(default)
    assert main(["models", "add", "mine", str(gguf), "--dtype", "stored"]) == 0
    capsys.readouterr()
    mine = registry.load_registry()["mine"]
    assert not any(mine.folder().glob("*.safetensors"))  # no float copy of the weights
    assert mine.context_length == default.context_length and mine.chat_template
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("The lighthouse keeper climbed the stairs and")

    def text(model: str, dtype: str) -> str:
        args = ["generate", "--prompt-file", str(prompt), "--model", model, "--dtype", dtype,
                "--max-new-tokens", "20", "--device", "cpu", "--preset", "precise"]  # fmt: skip
        assert main(args) == 0
        return capsys.readouterr().out

    for dtype in ("float32", "stored"):  # stored: both read the file's blocks
        theirs, ours = text(default.id, dtype), text("mine", dtype)
        assert len(theirs.split()) > 5 and ours == theirs, dtype
    assert not any(mine.folder().glob("*.safetensors"))  # float32 came from the blocks
    assert sorted(p.name for p in models.iterdir()) == sorted([default.id, "mine"])
    assert paths.models_dir() == models

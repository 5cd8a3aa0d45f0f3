"""The registry: the shipped default entry, user folders, and refusing unusable folders."""

from __future__ import annotations

import pytest
from swiftwriter.errors import UserError
from swiftwriter.modelstore import registry


def test_default_entry_is_the_embedded_model(user_dirs):
    entry = registry.default_entry()
    assert entry.id == "smollm2-135m-instruct"
    assert entry.source == "pypi-gguf" and len(entry.sha256) == 64
    assert entry.context_length == 8192
    assert entry.status() == "not converted"  # a fresh data folder has nothing converted


def test_user_model_round_trip(user_dirs, tiny_llama):
    folder = user_dirs / "tiny"
    tiny_llama.save_pretrained(folder)
    entry = registry.add_user_model("tiny-llama", folder)
    assert entry.user and entry.status() == "ready" and not entry.trust_remote_code
    assert registry.resolve("tiny-llama").folder() == folder.resolve()
    assert registry.resolve(str(folder)).source == "folder"
    # A second model keeps the first.
    registry.add_user_model("tiny-2", folder, trust_remote_code=True)
    reg = registry.load_registry()
    assert {"tiny-llama", "tiny-2", "smollm2-135m-instruct"} <= set(reg)
    assert reg["tiny-2"].trust_remote_code and not reg["tiny-llama"].trust_remote_code


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda d: None, "does not exist"),
        (lambda d: d.mkdir(), "no config.json"),
        (lambda d: (d.mkdir(), (d / "config.json").write_text("{oops")), "not valid JSON"),
        (lambda d: (d.mkdir(), (d / "config.json").write_text("{}")), "no weights"),
        (
            lambda d: (d.mkdir(), (d / "config.json").write_text(" " * (1 << 20) + "{}")),
            "config.json is 1,048,578 bytes, more than the 1,048,576 allowed",
        ),
    ],
)
def test_unusable_folders_are_refused(user_dirs, setup, message):
    folder = user_dirs / "bad"
    setup(folder)
    with pytest.raises(UserError, match=message):
        registry.add_user_model("bad", folder)
    assert not registry.user_registry_path().exists()


def test_bad_names_and_unknown_models(user_dirs):
    with pytest.raises(UserError, match="letters"):
        registry.add_user_model("no spaces/please", user_dirs)
    with pytest.raises(UserError, match="is 250 characters long: at most 100") as refused:
        registry.add_user_model("m" * 250, user_dirs / "not-even-looked-at")
    assert "m" * 41 not in str(refused.value)
    registry.check_new_id("m" * 100)
    with pytest.raises(UserError, match="Unknown model"):
        registry.resolve("does-not-exist")

"""The user registry file: written by a TOML library (any path, comments kept), read through a
schema check that names the bad key, never left unloadable by `models add`."""

from __future__ import annotations

import pytest
from swiftwriter.cli import main
from swiftwriter.errors import UserError
from swiftwriter.modelstore import registry


@pytest.fixture
def model_folder(user_dirs, tiny_llama):
    def make(name):
        folder = user_dirs / name
        tiny_llama.save_pretrained(folder)
        return folder

    return make


def test_a_path_with_an_emoji_round_trips_and_the_default_model_still_resolves(model_folder):
    folder = model_folder("novel \U0001f4da models")
    entry = registry.add_user_model("tiny", folder)
    assert entry.folder() == folder.resolve()
    assert registry.default_entry().id == "smollm2-135m-instruct"
    assert registry.resolve("tiny").status() == "ready"


def test_hand_edits_keep_their_types_and_comments(model_folder):
    path = registry.user_registry_path()
    path.write_text(
        "# my models, tuned by hand\n\n"
        '[models.big]\nname = "Big"\nsource = "folder"\npath = "/nowhere"\n'
        'context_length = 4096\n\n[models.big.dtype]\ncpu = "float32"\n',
        encoding="utf-8",
    )
    registry.add_user_model("tiny", model_folder("tiny"))
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# my models, tuned by hand")
    big = registry.load_registry()["big"]
    assert big.context_length == 4096 and big.dtype == {"cpu": "float32"}


@pytest.mark.parametrize(
    "text, named",
    [
        ("models = 5\n", "'models' must be a table"),
        ("[models]\nx = 3\n", "model 'x' must be a table"),
        ('[models.x]\nsource = "folder"\npath = 5\n', "key 'path'"),
        ('[models.x]\nsource = "folder"\n', "key 'path'"),
        ('[models.x]\nsource = "hub"\npath = "/a"\n', "key 'source'"),
        ('[models.x]\nsource = "folder"\npath = "/a"\ncontext_length = "4096"\n', "context_length"),
        ('[models.x]\nsource = "folder"\npath = "/a"\ndtype = "{cpu = auto}"\n', "key 'dtype'"),
        ('[models.x]\nsource = "folder"\npath = "/a"\ndtype = { cpu = "fp8" }\n', "key 'dtype'"),
        ('[models.x]\nsource = "folder"\npath = "/a"\ndefault = "yes"\n', "key 'default'"),
        ('[models.x]\nsource = "folder"\npath = "/a"\ncolour = "red"\n', "unknown keys"),
        ('[models.x]\nsource = "folder"\npath = "/a"\nuser = true\n', "unknown keys"),
        ("[models.x\n", "not valid TOML"),
    ],
)
def test_a_corrupt_registry_is_one_line_naming_the_bad_key(user_dirs, text, named, capsys):
    registry.user_registry_path().write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match="registry") as caught:
        registry.load_registry()
    assert named in str(caught.value)
    assert main(["models", "list"]) == 1
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err and err.count("\n") == 1


def test_add_never_builds_on_a_broken_registry(user_dirs, model_folder):
    path = registry.user_registry_path()
    path.write_text('[models.x]\nsource = "folder"\npath = 5\n', encoding="utf-8")
    with pytest.raises(UserError, match="key 'path'"):
        registry.add_user_model("tiny", model_folder("tiny"))
    assert path.read_text(encoding="utf-8") == '[models.x]\nsource = "folder"\npath = 5\n'


def test_a_symlink_loop_is_one_clear_line(user_dirs, capsys):
    loop = user_dirs / "loop"
    loop.symlink_to(loop)
    assert main(["models", "add", "looped", str(loop)]) == 1
    err = capsys.readouterr().err
    assert "loop" in err and "Traceback" not in err

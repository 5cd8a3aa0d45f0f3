"""A model's own code (trust_remote_code) runs only when no other user can have written it: its
folder, its Python files and transformers' module cache, where they are copied and imported."""

from __future__ import annotations

import os

import pytest
from swiftwriter import paths
from swiftwriter.errors import UserError
from swiftwriter.modelstore.remote_code import check_remote_code


def test_a_models_code_that_others_can_write_is_not_run(tmp_path):
    folder = paths.own_folder(tmp_path / "custom")
    code = folder / "modeling_custom.py"
    code.write_text("raise SystemExit('ran')\n")
    os.chmod(code, 0o644)
    check_remote_code("custom", folder)  # the user's alone: it may run
    os.chmod(code, 0o666)
    with pytest.raises(UserError, match=f"{code} can be written by other users"):
        check_remote_code("custom", folder)
    os.chmod(code, 0o644)
    os.chmod(folder, 0o777)
    with pytest.raises(UserError, match="Model 'custom' runs its own code"):
        check_remote_code("custom", folder)


def test_the_module_cache_is_made_for_the_user_alone(tmp_path, monkeypatch):
    import transformers.utils

    cache = tmp_path / "modules"
    monkeypatch.setattr(transformers.utils, "HF_MODULES_CACHE", str(cache))
    before = os.umask(0)
    try:
        check_remote_code("custom", paths.own_folder(tmp_path / "custom"))
    finally:
        os.umask(before)
    assert os.stat(cache).st_mode & 0o777 == 0o700
    os.chmod(cache, 0o777)  # transformers made it under umask 000
    with pytest.raises(UserError, match=f"{cache} can be written by other users"):
        check_remote_code("custom", tmp_path / "custom")

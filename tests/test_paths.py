"""The app's own folders are this user's alone whatever the umask, and code is loaded only from
places no other user can write (`paths.unsafe_to_load`)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from swiftwriter import paths


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_apps_folders_are_made_0700_under_umask_000(tmp_path):
    code = (
        "import os; os.umask(0)\n"
        "from swiftwriter import paths, logs\n"
        "paths.cache_dir(); paths.data_dir(); paths.config_dir(); paths.models_dir()\n"
        "logs.setup()\n"
    )
    env = {**os.environ, "SWIFTWRITER_CACHE_DIR": str(tmp_path / "new" / "cache"),
           "SWIFTWRITER_DATA_DIR": str(tmp_path / "data"),
           "SWIFTWRITER_MODELS_DIR": str(tmp_path / "data" / "models"),
           "SWIFTWRITER_CONFIG_DIR": str(tmp_path / "config"),
           "SWIFTWRITER_LOG_DIR": str(tmp_path / "logs")}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for name in ("new", "new/cache", "data", "data/models", "config", "logs"):
        assert mode(tmp_path / name) == 0o700, name  # 0777 before


def test_a_folder_that_exists_is_left_as_it_is(tmp_path):
    (tmp_path / "shared").mkdir()
    os.chmod(tmp_path / "shared", 0o755)
    assert paths.own_folder(tmp_path / "shared") == tmp_path / "shared"
    assert mode(tmp_path / "shared") == 0o755


def test_code_is_loaded_only_from_places_no_other_user_can_write(tmp_path, monkeypatch):
    root = paths.own_folder(tmp_path / "root")
    paths.own_folder(root / "sub")
    library = root / "sub" / "lib.so"
    library.write_bytes(b"\x7fELF")
    os.chmod(library, 0o700)
    assert paths.unsafe_to_load(library, root) is None
    os.chmod(root, 0o777)  # a folder on the way that others can write
    assert paths.unsafe_to_load(library, root) == f"{root} can be written by other users"
    os.chmod(root, 0o700)
    os.chmod(library, 0o620)
    assert paths.unsafe_to_load(library, root) == f"{library} can be written by other users"
    os.chmod(library, 0o700)
    (root / "sub" / "link.so").symlink_to(library)
    assert "is a symbolic link" in paths.unsafe_to_load(root / "sub" / "link.so", root)
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
    assert paths.unsafe_to_load(library, root) == f"{library} belongs to another user"

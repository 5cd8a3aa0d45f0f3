"""A drafter's files are written through the one atomic helper (atomic.py): a save that fails
half-way leaves the drafter that was there, whole, and no temporary beside it; a saved drafter
is readable by others, as a copied file is."""

from __future__ import annotations

import pytest
import torch
from swiftwriter.engine.decoding import drafter_files as files


def bundle(value: float) -> files.DrafterBundle:
    module = torch.nn.Linear(2, 2, bias=False)
    torch.nn.init.constant_(module.weight, value)
    return files.DrafterBundle(module, torch.arange(4), {"kind": "linear", "value": value})


def test_a_failed_save_leaves_the_old_drafter_whole(tmp_path, monkeypatch):
    files.save(tmp_path, bundle(1.0))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert set(before) == {files.WEIGHTS, files.CARD}
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in tmp_path.iterdir())

    def half_written(tensors, path, metadata=None):
        with open(path, "wb") as f:
            f.write(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(files, "save_file", half_written)
    with pytest.raises(OSError, match="disk full"):
        files.save(tmp_path, bundle(2.0))
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before

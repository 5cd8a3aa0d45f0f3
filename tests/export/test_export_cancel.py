"""A Cancel (ExportJob.should_stop) at any point of an export leaves the target as it was and
no temporary file beside it; without a job the export runs as before."""

from __future__ import annotations

import pytest
from swiftwriter.export.files import _partial_prefix
from swiftwriter.export.job import ExportCancelled, ExportJob
from swiftwriter.export.model import Manuscript, Section
from swiftwriter.export.request import ExportRequest, export_manuscript

BOOK = Manuscript("The Grey Sea", "Elena Marsh",
                  [Section(1, f"Chapter {n}", "The sea was grey.\n\nThe wall was old.")
                   for n in range(1, 6)])  # fmt: skip


def cancelling_after(asks: int):
    """A job whose Cancel comes at its `asks`-th question; it records what it was told."""
    state = {"asked": 0, "stages": []}

    def should_stop() -> bool:
        state["asked"] += 1
        return state["asked"] > asks

    return ExportJob(should_stop, state["stages"].append), state


@pytest.mark.parametrize("fmt", ["md", "docx", "epub"])
def test_every_cancel_point_leaves_the_target_as_it_was(tmp_path, fmt):
    out = tmp_path / f"book.{fmt}"
    job, state = cancelling_after(10**6)
    export_manuscript(BOOK, out, ExportRequest(fmt=fmt), job=job)
    points, finished = state["asked"], out.read_bytes()
    assert points >= 2 and state["stages"]  # asked more than once, told a stage
    for asks in range(points):
        out.write_bytes(b"earlier")
        job, _ = cancelling_after(asks)
        with pytest.raises(ExportCancelled):
            export_manuscript(BOOK, out, ExportRequest(fmt=fmt), job=job)
        assert out.read_bytes() == b"earlier", f"cancelled at question {asks + 1}"
        assert not list(tmp_path.glob(_partial_prefix(out) + "*"))
    out.unlink()
    export_manuscript(BOOK, out, ExportRequest(fmt=fmt))
    assert out.read_bytes()[:2] == finished[:2] and out.stat().st_mode & 0o777 == 0o644

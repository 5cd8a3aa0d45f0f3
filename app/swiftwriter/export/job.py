"""A running export as the app's worker follows it: the stage in plain words, and Cancel.
Kept apart from the request so every export step (Markdown, Word, LibreOffice) can take one
without importing the others."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


class ExportCancelled(Exception):
    """The writer pressed Cancel: nothing was written, the target is as it was."""


def _never() -> bool:
    return False


def _quiet(message: str) -> None:
    pass


@dataclass(frozen=True)
class ExportJob:
    """How a running export is watched: `should_stop` is asked between stages, between
    sections and while LibreOffice converts; `report` is told each stage in plain words.
    The command line passes none (the export just runs)."""

    should_stop: Callable[[], bool] = _never
    report: Callable[[str], None] = _quiet

    def check(self) -> None:
        if self.should_stop():
            raise ExportCancelled("Export cancelled: nothing was written")

    def stage(self, message: str) -> None:
        self.check()
        self.report(message)

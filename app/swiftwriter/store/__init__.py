"""The project store: one SQLite file per project (documents, snapshots, notes, lorebook,
generations, drafting caches). No torch and no Qt here, so the CLI and tests use it cheaply."""

from swiftwriter.store.project import Project
from swiftwriter.store.records import (
    DOCUMENT_KINDS,
    Document,
    Generation,
    LoreEntry,
    Note,
    ProjectError,
    ProjectLockedError,
    Snapshot,
)
from swiftwriter.store.take_records import GenerationRecord

__all__ = [
    "DOCUMENT_KINDS",
    "Document",
    "Generation",
    "GenerationRecord",
    "LoreEntry",
    "Note",
    "Project",
    "ProjectError",
    "ProjectLockedError",
    "Snapshot",
]

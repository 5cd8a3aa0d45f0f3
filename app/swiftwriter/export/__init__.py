"""Export a manuscript to Markdown, Word (DOCX), EPUB, OpenDocument (ODT) or PDF, and import
Markdown, text and DOCX files; every format by its name is FORMAT_NAMES.

Everything works on the neutral `Manuscript` (model.py), so the store, the CLI and the app
share one path; nothing here imports Qt or torch."""

from swiftwriter.export.model import Manuscript, Section, manuscript_from_project

# every export format by the writer's name for it: the CLI's help and choices, and the request's
FORMAT_NAMES = {"md": "Markdown", "docx": "Word (DOCX)", "epub": "EPUB", "odt": "OpenDocument (ODT)",
                "pdf": "PDF"}  # fmt: skip
FORMATS = tuple(FORMAT_NAMES)


def format_names() -> str:
    """'Markdown, Word (DOCX), OpenDocument (ODT) or PDF'."""
    names = list(FORMAT_NAMES.values())
    return ", ".join(names[:-1]) + " or " + names[-1]


__all__ = [
    "FORMATS",
    "FORMAT_NAMES",
    "Manuscript",
    "Section",
    "format_names",
    "manuscript_from_project",
]

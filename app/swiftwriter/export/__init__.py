"""Export a manuscript to Markdown or DOCX and import Markdown, text and DOCX files.

Everything works on the neutral `Manuscript` (model.py), so the store, the CLI and the app
share one path; nothing here imports Qt or torch."""

from swiftwriter.export.model import Manuscript, Section, manuscript_from_project

FORMATS = ("md", "docx")

__all__ = ["FORMATS", "Manuscript", "Section", "manuscript_from_project"]

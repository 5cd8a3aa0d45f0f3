"""Export a manuscript to Markdown, DOCX (ODT and PDF from it) or EPUB, and import Markdown,
text and DOCX files; the formats an export offers are request.FORMATS.

Everything works on the neutral `Manuscript` (model.py), so the store, the CLI and the app
share one path; nothing here imports Qt or torch."""

from swiftwriter.export.model import Manuscript, Section, manuscript_from_project

__all__ = ["Manuscript", "Section", "manuscript_from_project"]

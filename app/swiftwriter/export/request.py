"""One export, as the Export dialog and `swiftwriter export` both describe it: the format, the
look, which documents, the page set-up, the title-page fields and an e-book's front and back
matter. `export_manuscript` is the one path both take; ODT and PDF go through LibreOffice where it is installed (office.py). An
`ExportJob` lets the app's worker follow the stages and stop one midway (Cancel): the target is
replaced only at the very end, so a cancelled export leaves it as it was."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from swiftwriter.errors import UserError
from swiftwriter.export import FORMATS, office
from swiftwriter.export.docx_out import export_docx
from swiftwriter.export.epub_out import check_language, export_epub
from swiftwriter.export.files import refuse_project_files
from swiftwriter.export.job import ExportJob
from swiftwriter.export.layout import PageSetup
from swiftwriter.export.markdown_out import export_markdown
from swiftwriter.export.model import BookMatter, Manuscript

STYLES = ("novel", "report", "manuscript")


@dataclass(frozen=True)
class ExportRequest:
    fmt: str = "docx"
    style: str = "novel"
    page_breaks: bool | None = None  # None: on for novels and manuscripts, off for reports
    page: PageSetup = PageSetup()
    template: str | None = None
    title: str | None = None  # None: the project's own
    author: str | None = None
    strict: bool = False
    matter: BookMatter = BookMatter()  # EPUB: the pages before and after the text
    language: str = ""  # EPUB: a language tag such as en-GB; "" = the locale's

    def check(self) -> None:
        if self.fmt not in FORMATS:
            raise UserError(f"Unknown format '{self.fmt}'; choose one of {', '.join(FORMATS)}")
        if self.style not in STYLES:
            raise UserError(f"Unknown style '{self.style}'; choose one of {', '.join(STYLES)}")
        if self.template and not Path(self.template).expanduser().is_file():
            raise UserError(f"No such template: {self.template}")
        if self.language:
            check_language(self.language)


def export_manuscript(
    manuscript: Manuscript,
    out: Path | str,
    request: ExportRequest,
    project: Path | str | None = None,
    job: ExportJob | None = None,
) -> int:
    """Write `out` as asked; returns how many control characters were dropped. `project`, the
    file the manuscript came from, is never replaced, nor the files kept beside it; `job`
    follows and may cancel it (ExportCancelled)."""
    job = job or ExportJob()
    request.check()
    refuse_project_files(out, project)
    overrides = {k: v for k, v in (("title", request.title), ("author", request.author)) if v}
    if overrides:
        manuscript = dataclasses.replace(manuscript, **overrides)
    if request.fmt == "md":
        job.stage("Writing the Markdown file…")
        return export_markdown(manuscript, out, strict=request.strict, job=job, style=request.style)
    if request.fmt == "epub":
        job.stage("Writing the e-book…")
        return export_epub(
            manuscript, out, request.style, request.matter, request.language, request.strict, job
        )

    options = dict(
        style=request.style,
        page_breaks=request.page_breaks,
        strict=request.strict,
        page=request.page,
        template=request.template,
    )
    if request.fmt == "docx":
        job.stage("Laying out the Word document…")
        return export_docx(manuscript, out, job=job, **options)

    return office.export_via_libreoffice(manuscript, out, request.fmt, job=job, **options)

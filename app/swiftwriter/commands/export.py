"""`swiftwriter export`: write a project, or some of its documents, as Markdown, Word (DOCX),
an EPUB e-book, OpenDocument (ODT) or PDF (these two through LibreOffice)."""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

from swiftwriter.errors import UserError, printable
from swiftwriter.export import FORMATS, format_names
from swiftwriter.export.model import BookMatter, manuscript_from_project
from swiftwriter.store import Project


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "export",
        help=f"export a project to {format_names()}",
        description="Export a whole project, or chosen documents with everything below them, "
        f"to one {format_names()} file (ODT and PDF through LibreOffice where it is installed).",
    )
    _add_what_and_where(parser)
    _add_look(parser)
    _add_title_page(parser)
    add_epub_arguments(parser)
    parser.set_defaults(func=run)


def _add_what_and_where(parser: argparse.ArgumentParser) -> None:
    """The project (or some of its documents), the format and the file written."""
    parser.add_argument("project", metavar="PROJECT", help="project file to export")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        help="md, docx, epub (an EPUB 3 e-book), or odt / pdf through LibreOffice where it is "
        "installed (default: from the --out file's extension)",
    )
    parser.add_argument("--out", required=True, metavar="FILE", help="file to write")
    parser.add_argument(
        "--docs",
        nargs="+",
        metavar="ID",
        help="export only these documents (and the documents below them): ids, separated by "
        "spaces or commas",
    )


def _add_look(parser: argparse.ArgumentParser) -> None:
    """The style, the pages and the Word template."""
    parser.add_argument(
        "--style",
        choices=("novel", "report", "manuscript"),
        default="novel",
        help="the look: novel (indented paragraphs, scenes set apart by scene breaks), report "
        "(numbered headings, table of contents, titled scenes as headings) or manuscript "
        "(Standard Manuscript Format for agents and publishers); default novel. Markdown "
        "and EPUB follow it for scenes",
    )
    parser.add_argument(
        "--page-breaks",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="DOCX: start every chapter on a new page (default: on for novels and manuscripts, "
        "off for reports)",
    )
    parser.add_argument(
        "--page-size",
        choices=("a4", "letter"),
        help="DOCX paper (default: from your locale, Letter in the US and Canada, else A4)",
    )
    parser.add_argument(
        "--template", metavar="FILE.docx", help="DOCX: use this Word document's styles"
    )


def _add_title_page(parser: argparse.ArgumentParser) -> None:
    """The title page's words, and what happens to control characters in the text."""
    parser.add_argument("--title", help="the title on the title page (default: the project's)")
    parser.add_argument("--author", help="the author's name (default: the project's)")
    parser.add_argument(
        "--contact",
        help="manuscript title page: your name and address, lines separated by '|'",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse text with control characters instead of dropping them",
    )


def add_epub_arguments(parser: argparse.ArgumentParser) -> None:
    """The e-book's front and back matter and language, chosen per export."""
    group = parser.add_argument_group("EPUB", "the pages around the text of an e-book")
    group.add_argument(
        "--no-title-page",
        dest="title_page",
        action="store_false",
        help="leave out the title page (title and author)",
    )
    group.add_argument(
        "--copyright", metavar="TEXT", help="a copyright page; lines separated by '|'"
    )
    group.add_argument(
        "--dedication", metavar="TEXT", help="a dedication page; lines separated by '|'"
    )
    group.add_argument(
        "--back-matter",
        metavar="MARKDOWN",
        help="a page after the text, such as a note about the author (Markdown)",
    )
    group.add_argument(
        "--back-matter-title",
        metavar="TITLE",
        default="About the Author",
        help="its heading (default: About the Author)",
    )
    group.add_argument(
        "--language",
        metavar="TAG",
        default="",
        help="the book's language, such as en, en-GB or pt-BR (default: your locale's)",
    )


def choose_format(fmt: str | None, out: Path) -> str:
    if fmt:
        return fmt
    suffix = out.suffix.lower().lstrip(".")
    if suffix in ("md", "markdown"):
        return "md"
    if suffix in ("docx", "epub", "odt", "pdf"):
        return suffix
    raise UserError(
        f"Cannot tell the format from '{out.name}'; add --format md, docx, epub, odt or pdf"
    )


def run(args: argparse.Namespace) -> int:
    out = Path(args.out).expanduser()
    fmt = choose_format(args.format, out)
    project_path = Path(args.project).expanduser()
    if not project_path.exists():
        raise UserError(f"No such project: {project_path}")
    start = time.perf_counter()
    docs = [d for part in args.docs or () for d in part.split(",") if d.strip()]
    manuscript = load_manuscript(project_path, docs or None)
    from swiftwriter.export.layout import PageSetup  # lazy: pulls in docx
    from swiftwriter.export.request import ExportRequest, export_manuscript  # lazy: pulls in docx

    contact = _lines(args.contact)
    matter = BookMatter(
        title_page=args.title_page,
        copyright=_lines(args.copyright),
        dedication=_lines(args.dedication),
        back_title=args.back_matter_title,
        back_matter=args.back_matter or "",
    )
    request = ExportRequest(
        fmt=fmt,
        style=args.style,
        page_breaks=args.page_breaks,
        page=PageSetup(page_size=args.page_size or "", contact=contact),
        template=args.template,
        title=args.title,
        author=args.author,
        strict=args.strict,
        matter=matter,
        language=args.language,
    )
    removed = export_manuscript(manuscript, out, request, project=project_path)
    if removed:
        print(
            f"swiftwriter: dropped {removed} control character(s) a document cannot hold",
            file=sys.stderr,
        )
    count = len(manuscript.sections)
    seconds = time.perf_counter() - start
    print(f"Exported {count} document(s) to {printable(out)} in {seconds:.2f} s")
    return 0


def _lines(text: str | None) -> str:
    """'one | two' as typed on a command line: one line each."""
    return "\n".join(line.strip() for line in (text or "").split("|"))


def load_manuscript(project_path: Path, doc_ids):
    try:
        proj = Project.open(project_path, readonly=True)
    except (OSError, ValueError, sqlite3.DatabaseError) as exc:
        raise UserError(f"Cannot open project {project_path}: {exc}") from exc
    try:
        return manuscript_from_project(proj, doc_ids)
    finally:
        close = getattr(proj, "close", None)
        if close is not None:
            close()

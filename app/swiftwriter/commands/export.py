"""`swiftwriter export`: write a project, or some of its documents, as Markdown or DOCX."""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

from swiftwriter.errors import UserError

FORMATS = ("md", "docx")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "export",
        help="export a project to Markdown or DOCX",
        description="Export a whole project, or chosen documents with everything below them, "
        "to one Markdown or Word (DOCX) file.",
    )
    parser.add_argument("project", metavar="PROJECT", help="project file to export")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        help="md or docx (default: from the --out file's extension)",
    )
    parser.add_argument("--out", required=True, metavar="FILE", help="file to write")
    parser.add_argument(
        "--docs",
        nargs="+",
        metavar="ID",
        help="export only these documents (and the documents below them)",
    )
    parser.add_argument(
        "--style",
        choices=("novel", "report"),
        default="novel",
        help="DOCX look: novel (indented paragraphs, scene breaks) or report "
        "(numbered headings, table of contents); default novel",
    )
    parser.add_argument(
        "--page-breaks", action="store_true", help="DOCX: start every chapter on a new page"
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse text with control characters instead of dropping them",
    )
    parser.set_defaults(func=run)


def choose_format(fmt: str | None, out: Path) -> str:
    if fmt:
        return fmt
    suffix = out.suffix.lower().lstrip(".")
    if suffix in ("md", "markdown"):
        return "md"
    if suffix == "docx":
        return "docx"
    raise UserError(f"Cannot tell the format from '{out.name}'; add --format md or --format docx")


def run(args: argparse.Namespace) -> int:
    out = Path(args.out).expanduser()
    fmt = choose_format(args.format, out)
    project_path = Path(args.project).expanduser()
    if not project_path.exists():
        raise UserError(f"No such project: {project_path}")
    start = time.perf_counter()
    manuscript = load_manuscript(project_path, args.docs)
    if fmt == "md":
        from swiftwriter.export.markdown_out import export_markdown

        removed = export_markdown(manuscript, out, strict=args.strict)
    else:
        from swiftwriter.export.docx_out import export_docx

        removed = export_docx(
            manuscript, out, style=args.style, page_breaks=args.page_breaks, strict=args.strict
        )
    if removed:
        print(
            f"swiftwriter: dropped {removed} control character(s) a document cannot hold",
            file=sys.stderr,
        )
    count = len(manuscript.sections)
    seconds = time.perf_counter() - start
    print(f"Exported {count} document(s) to {out} in {seconds:.2f} s")
    return 0


def load_manuscript(project_path: Path, doc_ids):
    from swiftwriter.export.model import manuscript_from_project
    from swiftwriter.store import Project

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

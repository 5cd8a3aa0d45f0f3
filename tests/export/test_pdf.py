"""LibreOffice opens what we write: an exported DOCX converts to PDF without error.

Runs wherever `soffice` exists (Debian: apt-get install libreoffice-writer)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from swiftwriter.export.docx_out import export_docx
from swiftwriter.export.model import Manuscript, Section

SOFFICE = shutil.which("soffice") or shutil.which("libreoffice")

pytestmark = pytest.mark.skipif(SOFFICE is None, reason="LibreOffice (soffice) is not installed")


def test_libreoffice_converts_exported_docx_to_pdf(manuscript, tmp_path):
    extra = Section(1, "Welt 🌍 עולם", "שלום *עולם* and مرحبا, 🚀 done.\x07", kind="chapter")
    ms = Manuscript(manuscript.title, manuscript.author, [*manuscript.sections, extra])
    sources = []
    for style in ("novel", "report"):
        out = tmp_path / f"{style}.docx"
        export_docx(ms, out, style=style, page_breaks=True)
        sources.append(out)
    empty = tmp_path / "empty.docx"
    export_docx(Manuscript(), empty)
    sources.append(empty)
    profile = tmp_path / "lo-profile"  # its own profile: no clash with a running LibreOffice
    result = subprocess.run(
        [
            SOFFICE,
            f"-env:UserInstallation=file://{profile}",
            "--headless",
            "--convert-to",
            "pdf",
            "--outdir",
            str(tmp_path / "pdf"),
            *map(str, sources),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    for source in sources:
        pdf = tmp_path / "pdf" / f"{source.stem}.pdf"
        assert pdf.is_file(), f"no PDF for {source.name}: {result.stdout} {result.stderr}"
        data = pdf.read_bytes()
        assert data.startswith(b"%PDF") and b"%%EOF" in data[-1024:]
    # Page breaks reach the PDF: a title page, then Part One, The Storm, Morning and the
    # last chapter each on their own page.
    novel = (tmp_path / "pdf" / "novel.pdf").read_bytes()
    assert len(re.findall(rb"/Type\s*/Page(?![s\w])", novel)) >= 5


def test_the_app_exports_odt_and_pdf_through_libreoffice(manuscript, tmp_path):
    """The one export path (ExportRequest) for every style: a real PDF with its pages, and an
    ODT LibreOffice reads back."""
    from swiftwriter.export.request import ExportRequest, export_manuscript

    for style in ("novel", "report", "manuscript"):
        pdf = tmp_path / f"{style}.pdf"
        export_manuscript(manuscript, pdf, ExportRequest(fmt="pdf", style=style))
        data = pdf.read_bytes()
        assert data.startswith(b"%PDF") and len(re.findall(rb"/Type\s*/Page(?![s\w])", data)) >= 2
    odt = tmp_path / "novel.odt"
    export_manuscript(manuscript, odt, ExportRequest(fmt="odt"))
    assert (
        odt.read_bytes()[:2] == b"PK"
        and b"application/vnd.oasis.opendocument.text" in (odt.read_bytes()[:200])
    )

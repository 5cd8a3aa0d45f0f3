"""Hostile Word files for the import and template tests: each is a real .docx built from the
one python-docx writes, changed where a fault campaign found the reader or writer weak."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import docx

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_HEADER_TYPE = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/header"
_HEADER_CT = "application/vnd.openxmlformats-officedocument.wordprocessingml.header+xml"


def _rewrite(path: Path, change, extra: dict[str, bytes] | None = None) -> Path:
    """A fresh python-docx document with `change(name, data)` applied to each part."""
    base = io.BytesIO()
    docx.Document().save(base)
    with zipfile.ZipFile(base) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for item in src.infolist():
            data = change(item.filename, src.read(item))
            if data is not None:
                out.writestr(item, data)
        for name, data in (extra or {}).items():
            out.writestr(name, data)
    return path


def many_parts_bomb(path: Path, parts: int = 120, size: int = 1_048_000) -> Path:
    """`parts` header parts, each just under 1 MiB of empty paragraphs and all referenced by
    the document, so python-docx parses every one (about 250 KB on disk)."""
    rels = "".join(
        f'<Relationship Id="rX{i}" Type="{_HEADER_TYPE}" Target="header{i}.xml"/>'
        for i in range(parts)
    )
    types = "".join(
        f'<Override PartName="/word/header{i}.xml" ContentType="{_HEADER_CT}"/>'
        for i in range(parts)
    )

    def change(name, data):
        if name == "word/_rels/document.xml.rels":
            return data.replace(b"</Relationships>", rels.encode() + b"</Relationships>")
        if name == "[Content_Types].xml":
            return data.replace(b"</Types>", types.encode() + b"</Types>")
        return data

    head = f'<?xml version="1.0"?><w:hdr xmlns:w="{_W}">'.encode()
    body = b"<w:p/>" * ((size - len(head) - 8) // 6)
    part = head + body + b"</w:hdr>"
    return _rewrite(path, change, {f"word/header{i}.xml": part for i in range(parts)})


def with_paragraphs(path: Path, xml: str, numbering: str | None = None) -> Path:
    """The document with raw paragraph XML before its section properties, and optionally
    `numbering` inserted at the top of numbering.xml (abstractNum / num definitions)."""

    def change(name, data):
        if name == "word/document.xml":
            return data.replace(b"<w:sectPr", xml.encode() + b"<w:sectPr", 1)
        if name == "word/numbering.xml" and numbering:
            return re.sub(rb"(<w:numbering[^>]*>)", rb"\1" + numbering.encode(), data, count=1)
        return data

    return _rewrite(path, change)


def list_item(text: str, ilvl: str = "0", num_id: str = "1") -> str:
    return (
        f'<w:p><w:pPr><w:numPr><w:ilvl w:val="{ilvl}"/><w:numId w:val="{num_id}"/></w:numPr>'
        f"</w:pPr><w:r><w:t>{text}</w:t></w:r></w:p>"
    )


def without_numbering(path: Path) -> Path:
    """A valid Word document with no numbering part (as many templates are)."""

    def change(name, data):
        if name == "word/numbering.xml":
            return None
        if name in ("word/_rels/document.xml.rels", "[Content_Types].xml"):
            return re.sub(rb"<(?:Relationship|Override) [^>]*numbering[^>]*/>", b"", data)
        return data

    return _rewrite(path, change)

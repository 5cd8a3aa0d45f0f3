"""A Word file checked by its zip directory before python-docx unpacks anything, for imports
and templates alike. python-docx reads every part a document refers to and parses the XML
ones into trees about twenty times their size, so what the directory declares (the zip reader
never unpacks a part past its declared size) bounds the memory a file can take: a small file
whose parts unpack to gigabytes (a zip bomb, or many parts each below a per-part limit) is
refused in one line."""

from __future__ import annotations

import zipfile
from pathlib import Path

from lxml import etree

from swiftwriter.errors import UserError

MAX_BYTES = 64 << 20  # the file as it lies on disk
MAX_UNPACKED = 128 << 20  # all parts together, pictures included
MAX_XML = 32 << 20  # the parts parsed as XML together: a long novel's are a few MB
MAX_RATIO = 100  # a part, or the XML, unpacking to this many times its packed size is a
RATIO_FROM = 4 << 20  # bomb once there is enough of it to matter (300,000 tabs pack 1000:1)
MAX_PARTS = 5000
MAX_TYPES = 1 << 20  # [Content_Types].xml, read to tell XML parts from pictures
_TYPES = "[Content_Types].xml"
_CT = "{http://schemas.openxmlformats.org/package/2006/content-types}"


def check_docx_package(file: Path, role: str = "") -> None:
    """Refuse `file` unless it is a zip whose parts unpack to what a manuscript could hold.
    `role` names what it was given as ('a template'), for the message."""
    name = f"{file.name} {'as ' + role + ' ' if role else ''}"
    size = file.stat().st_size
    if size > MAX_BYTES:
        raise UserError(f"{name}was refused: it is {size >> 20} MB (at most {MAX_BYTES >> 20})")
    try:
        with zipfile.ZipFile(file) as zf:
            parts = zf.infolist()
            unpacked = sum(p.file_size for p in parts)
            bomb = any(
                p.file_size > RATIO_FROM and p.file_size > MAX_RATIO * max(p.compress_size, 1)
                for p in parts
            )
            if len(parts) > MAX_PARTS or unpacked > MAX_UNPACKED or bomb:
                _refuse(name, f"it unpacks to {unpacked >> 20} MB in {len(parts)} parts")
            xml = [p for p in parts if _is_xml(p.filename, _content_types(zf, name))]
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise UserError(f"{file.name} is not a Word (.docx) document: {exc}") from exc
    text = sum(p.file_size for p in xml)
    packed = sum(p.compress_size for p in xml)
    if text > MAX_XML or (text > RATIO_FROM and text > MAX_RATIO * max(packed, 1)):
        _refuse(
            name,
            f"it unpacks to {unpacked >> 20} MB in {len(parts)} parts, {text >> 20} MB of them "
            f"XML from {max(packed >> 10, 1)} KB",
        )


def _refuse(name: str, why: str) -> None:
    raise UserError(f"{name}was refused: {why}, far more than a manuscript (a damaged or "
                    "malicious file)")  # fmt: skip


def _content_types(zf: zipfile.ZipFile, name: str) -> dict[str, str]:
    """Part name (and '.extension') -> content type, lower-cased; empty when unreadable, which
    counts every part as XML."""
    try:
        info = zf.getinfo(_TYPES)
    except KeyError:
        return {}
    if info.file_size > MAX_TYPES:
        _refuse(name, f"its list of parts unpacks to {info.file_size >> 20} MB")
    try:
        root = etree.fromstring(
            zf.read(info), etree.XMLParser(resolve_entities=False, no_network=True)
        )
    except (etree.LxmlError, zipfile.BadZipFile, ValueError):
        return {}
    types = {}
    for el in root.iter(f"{_CT}Default"):
        types["." + (el.get("Extension") or "").lower()] = (el.get("ContentType") or "").lower()
    for el in root.iter(f"{_CT}Override"):
        part = (el.get("PartName") or "").lstrip("/").lower()
        types[part] = (el.get("ContentType") or "").lower()
    return types


def _is_xml(part: str, types: dict[str, str]) -> bool:
    """Whether python-docx may parse the part as XML: by its content type, and when it has
    none (or the list is unreadable), to be safe, yes."""
    if part.endswith("/"):
        return False
    key = part.lower()
    kind = types.get(key) or types.get("." + key.rsplit(".", 1)[-1] if "." in key else "")
    return not kind or "xml" in kind

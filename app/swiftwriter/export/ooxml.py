"""The WordprocessingML python-docx has no API for: list and heading numbering, hyperlinks,
fields, right-to-left paragraphs and theme-free fonts. Kept apart so the writer reads plainly."""

from __future__ import annotations

import unicodedata

from docx.opc.constants import CONTENT_TYPE as CT
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.oxml import OxmlElement, parse_xml
from docx.oxml.ns import nsdecls, qn
from docx.parts.numbering import NumberingPart

TWIPS_PER_INCH = 1440
_BULLETS = ("\u2022", "\u25e6", "\u25aa")
_ORDERED = (("decimal", "%{n}."), ("lowerLetter", "%{n}."), ("lowerRoman", "%{n}."))


def _abstract_num(abstract_id: int, levels: list[str]) -> object:
    xml = f'<w:abstractNum {nsdecls("w")} w:abstractNumId="{abstract_id}">'
    xml += '<w:multiLevelType w:val="multilevel"/>'
    for level in levels:
        xml += level
    xml += "</w:abstractNum>"
    return parse_xml(xml)


def _list_level(ilvl: int, fmt: str, text: str, style: str | None = None) -> str:
    left = int(TWIPS_PER_INCH * 0.5 * (ilvl + 1))
    pstyle = f'<w:pStyle w:val="{style}"/>' if style else ""
    return (
        f'<w:lvl w:ilvl="{ilvl}"><w:start w:val="1"/><w:numFmt w:val="{fmt}"/>{pstyle}'
        f'<w:lvlText w:val="{text}"/><w:lvlJc w:val="left"/>'
        f'<w:pPr><w:ind w:left="{left}" w:hanging="360"/></w:pPr></w:lvl>'
    )


def numbering_part(document):
    """The document's numbering part, made empty when it has none (many templates): python-docx
    finds one or raises NotImplementedError."""
    try:
        return document.part.numbering_part
    except NotImplementedError:
        package = document.part.package
        part = NumberingPart(
            package.next_partname("/word/numbering%d.xml"),
            CT.WML_NUMBERING,
            parse_xml(f"<w:numbering {nsdecls('w')}/>"),
            package,
        )
        document.part.relate_to(part, RT.NUMBERING)
        return part


class Numbering:
    """Adds this exporter's own list definitions to the document's numbering part.

    Every ordered list gets its own numbering instance so each starts again at its first number
    (Word's 'List Number' style would carry on counting across the whole document)."""

    def __init__(self, document) -> None:
        self.element = numbering_part(document).element
        self._bullet_abstract = self._add_abstract(
            [_list_level(i, "bullet", _BULLETS[i % 3]) for i in range(9)]
        )
        self._ordered_abstract = self._add_abstract(
            [
                _list_level(i, _ORDERED[i % 3][0], _ORDERED[i % 3][1].format(n=i + 1))
                for i in range(9)
            ]
        )
        self.bullet_num = self.element.add_num(self._bullet_abstract).numId

    def _add_abstract(self, levels: list[str]) -> int:
        ids = [int(a.get(qn("w:abstractNumId"))) for a in self.element.findall(qn("w:abstractNum"))]
        abstract_id = max(ids, default=-1) + 1
        node = _abstract_num(abstract_id, levels)
        first_num = self.element.find(qn("w:num"))
        if first_num is not None:
            first_num.addprevious(node)
        else:
            self.element.append(node)
        return abstract_id

    def new_ordered(self, ilvl: int, start: int) -> int:
        """A fresh numbering instance that starts at `start` on level `ilvl`."""
        num = self.element.add_num(self._ordered_abstract)
        num.add_lvlOverride(ilvl=ilvl).add_startOverride(start)
        return num.numId

    def number_headings(self, document) -> None:
        """Outline numbering 1, 1.1, 1.1.1 ... tied to the Heading 1-9 styles (report style)."""
        levels = []
        for i in range(9):
            text = ".".join(f"%{n}" for n in range(1, i + 2)) + ("." if i == 0 else "")
            levels.append(
                f'<w:lvl w:ilvl="{i}"><w:start w:val="1"/><w:numFmt w:val="decimal"/>'
                f'<w:pStyle w:val="Heading{i + 1}"/><w:suff w:val="space"/>'
                f'<w:lvlText w:val="{text}"/><w:lvlJc w:val="left"/></w:lvl>'
            )
        num_id = self.element.add_num(self._add_abstract(levels)).numId
        for i in range(9):
            ppr = document.styles[f"Heading {i + 1}"].element.get_or_add_pPr()
            num_pr = ppr.get_or_add_numPr()
            num_pr.get_or_add_ilvl().val = i
            num_pr.get_or_add_numId().val = num_id


def set_list(paragraph, num_id: int, ilvl: int) -> None:
    num_pr = paragraph._p.get_or_add_pPr().get_or_add_numPr()
    num_pr.get_or_add_ilvl().val = ilvl
    num_pr.get_or_add_numId().val = num_id


# pPr children that follow w:bidi in the schema; python-docx needs them to insert in order.
_AFTER_BIDI = (
    "w:adjustRightInd",
    "w:snapToGrid",
    "w:spacing",
    "w:ind",
    "w:contextualSpacing",
    "w:mirrorIndents",
    "w:suppressOverlap",
    "w:jc",
    "w:textDirection",
    "w:textAlignment",
    "w:textboxTightWrap",
    "w:outlineLvl",
    "w:divId",
    "w:cnfStyle",
    "w:rPr",
    "w:sectPr",
    "w:pPrChange",
)


def set_bidi(paragraph) -> None:
    """Mark a paragraph right-to-left, so Hebrew or Arabic reads from the right margin."""
    ppr = paragraph._p.get_or_add_pPr()
    if ppr.find(qn("w:bidi")) is None:
        ppr.insert_element_before(OxmlElement("w:bidi"), *_AFTER_BIDI)


def is_bidi(paragraph) -> bool:
    ppr = paragraph._p.pPr
    return ppr is not None and ppr.find(qn("w:bidi")) is not None


def first_strong_direction(text: str) -> str | None:
    """'rtl', 'ltr' or None: the Unicode bidi rule for a paragraph's base direction (P2)."""
    if text.isascii():  # the common case, without a per-character table look-up
        return "ltr" if any(ch.isalpha() for ch in text) else None
    for ch in text:
        kind = unicodedata.bidirectional(ch)
        if kind == "L":
            return "ltr"
        if kind in ("R", "AL"):
            return "rtl"
    return None


def is_rtl_only(text: str) -> bool:
    """True when the text has right-to-left letters and no left-to-right ones."""
    if text.isascii():
        return False
    kinds = {unicodedata.bidirectional(ch) for ch in text}
    return bool(kinds & {"R", "AL"}) and "L" not in kinds


def add_hyperlink(paragraph, url: str):
    """An external hyperlink element appended to the paragraph; move runs into it."""
    r_id = paragraph.part.relate_to(url, RT.HYPERLINK, is_external=True)
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), r_id)
    paragraph._p.append(link)
    return link


def add_field(paragraph, instruction: str, placeholder: str) -> None:
    """A complex field (e.g. TOC) marked dirty, so Word fills it in when the file opens."""

    def fld_char(kind: str):
        run = OxmlElement("w:r")
        char = OxmlElement("w:fldChar")
        char.set(qn("w:fldCharType"), kind)
        if kind == "begin":
            char.set(qn("w:dirty"), "true")
        run.append(char)
        return run

    p = paragraph._p
    p.append(fld_char("begin"))
    instr_run = OxmlElement("w:r")
    instr = OxmlElement("w:instrText")
    instr.set(qn("xml:space"), "preserve")
    instr.text = f" {instruction} "
    instr_run.append(instr)
    p.append(instr_run)
    p.append(fld_char("separate"))
    text_run = OxmlElement("w:r")
    text = OxmlElement("w:t")
    text.text = placeholder
    text_run.append(text)
    p.append(text_run)
    p.append(fld_char("end"))


def field_instructions(paragraph) -> str:
    return " ".join(t.text or "" for t in paragraph._p.iter(qn("w:instrText")))


def set_plain_font(rpr, name: str) -> None:
    """Use `name` for Latin text in this rPr, dropping the theme font that would win over it."""
    fonts = rpr.get_or_add_rFonts()
    for attr in ("w:asciiTheme", "w:hAnsiTheme"):
        if fonts.get(qn(attr)) is not None:
            del fonts.attrib[qn(attr)]
    fonts.set(qn("w:ascii"), name)
    fonts.set(qn("w:hAnsi"), name)


def default_rpr(document):
    """The document-wide default run properties (docDefaults), which python-docx hides."""
    defaults = document.styles.element.find(qn("w:docDefaults"))
    return defaults.find(qn("w:rPrDefault")).find(qn("w:rPr"))


def remove_borders(style) -> None:
    """Drop a paragraph style's borders (the default Title has a rule under it)."""
    ppr = style.element.get_or_add_pPr()
    for border in ppr.findall(qn("w:pBdr")):
        ppr.remove(border)

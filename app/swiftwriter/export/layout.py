"""Page set-up for DOCX exports: paper size (A4 or Letter, by default from the locale), margins,
page numbers, and what Standard Manuscript Format asks of a submission (1-inch margins,
double spacing, a running header with surname / title / page number, a title page with the
contact details and the word count rounded as publishers expect)."""

from __future__ import annotations

import locale
import os
from dataclasses import dataclass

from docx.enum.text import WD_ALIGN_PARAGRAPH
from docx.shared import Inches, Mm

from swiftwriter.errors import UserError
from swiftwriter.export import ooxml

PAGE_SIZES = {"a4": (Mm(210), Mm(297)), "letter": (Inches(8.5), Inches(11))}
# Countries whose paper is US Letter; the rest of the world uses A4.
LETTER_COUNTRIES = {"US", "CA", "MX", "PH", "CL", "CO", "VE", "GT", "CR", "PA", "DO", "SV", "PR"}


@dataclass(frozen=True)
class PageSetup:
    """How the pages of a DOCX export look; the defaults are the app's novel export."""

    page_size: str = ""  # "a4" or "letter"; "" = from the locale
    contact: str = ""  # manuscript title page: name, address, e-mail, one per line
    page_numbers: bool = True

    def size(self) -> str:
        size = (self.page_size or default_page_size()).lower()
        if size not in PAGE_SIZES:
            raise UserError(f"Unknown page size '{self.page_size}'; choose a4 or letter")
        return size


def default_page_size(env: dict | None = None) -> str:
    """Letter where the locale's country uses it (LC_PAPER, LC_ALL, LANG, then Python's own
    locale), else A4."""
    env = os.environ if env is None else env
    names = [env.get(k, "") for k in ("LC_PAPER", "LC_ALL", "LANG")]
    names.append((locale.getlocale()[0] or "") if env is os.environ else "")
    for name in names:
        country = name.split(".")[0].split("@")[0].partition("_")[2].upper()
        if country:
            return "letter" if country in LETTER_COUNTRIES else "a4"
    return "a4"


def rounded_word_count(words: int) -> str:
    """'about 85,000 words': to the nearest 100 below 10,000 words, else the nearest 1,000
    (what agents and editors expect on a title page)."""
    step = 100 if words < 10_000 else 1000
    rounded = max(step, int(round(words / step)) * step)
    return f"about {rounded:,} words"


def apply_page(document, setup: PageSetup, manuscript_format: bool, margins: bool = True):
    """The paper size on every section, and (unless a template keeps its own) 1-inch
    margins."""
    width, height = PAGE_SIZES[setup.size()]
    for section in document.sections:
        section.page_width, section.page_height = width, height
        if margins:
            margin = Inches(1)
            section.left_margin = section.right_margin = margin
            section.top_margin = section.bottom_margin = margin
            section.header_distance = section.footer_distance = Inches(0.5)
        section.different_first_page_header_footer = manuscript_format


def add_page_numbers(document, header_text: str = "") -> None:
    """Page numbers (a PAGE field): centred in the footer, or at the right of a header that
    starts with `header_text` ("Surname / TITLE / "), as manuscript format puts them."""
    for section in document.sections:
        parts = (section.header, section.footer)
        if any("PAGE" in ooxml.field_instructions(p) for x in parts for p in x.paragraphs):
            continue  # a template that numbers its pages already
        if header_text:
            p = section.header.paragraphs[0]
            p.alignment = WD_ALIGN_PARAGRAPH.RIGHT
            p.add_run(header_text)
        else:
            p = section.footer.paragraphs[0]
            p.alignment = WD_ALIGN_PARAGRAPH.CENTER
        ooxml.add_field(p, "PAGE", "1")


def manuscript_header(author: str, title: str) -> str:
    surname = author.split()[-1] if author.split() else "Anonymous"
    short = " ".join(title.split()[:4]).upper() or "UNTITLED"
    return f"{surname} / {short} / "

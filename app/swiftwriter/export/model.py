"""A neutral manuscript: what every exporter reads and every importer writes.

Exporters never touch the project store, so they can be tested on plain objects and reused by
the app, the CLI and the importers alike. No Qt and no torch here."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from swiftwriter.errors import UserError

# Kinds the store gives a document; importers leave the neutral "section".
CHAPTER_KINDS = ("part", "chapter")
BOOK_STYLES = ("novel", "manuscript")  # the looks of a printed book: scenes carry no heading


@dataclass(frozen=True)
class Section:
    """One document of the tree: its level (1 = top), its title and its Markdown text."""

    level: int
    title: str
    body: str = ""
    kind: str = "section"
    id: str | None = None


@dataclass(frozen=True)
class Manuscript:
    title: str = ""
    author: str = ""
    sections: list[Section] = field(default_factory=list)
    # what stays the same for a project across exports (its creation time): an e-book's
    # identifier is derived from it, so a reader takes a new export as the same book
    identity: str = ""


@dataclass(frozen=True)
class BookMatter:
    """The pages an e-book has around its text, chosen per export: an empty text leaves its
    page out. Copyright and dedication are kept line by line; the back matter is Markdown."""

    title_page: bool = True
    copyright: str = ""
    dedication: str = ""
    back_title: str = "About the Author"
    back_matter: str = ""


# Characters XML 1.0 cannot hold (C0 controls but tab, newline and carriage return; the two
# non-characters U+FFFE/U+FFFF; lone surrogates). Word and LibreOffice refuse a file with them.
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def xml_illegal_count(text: str) -> int:
    return len(_XML_ILLEGAL.findall(text))


def strip_xml_illegal(text: str) -> str:
    return _XML_ILLEGAL.sub("", text)


def check_text(manuscript: Manuscript, strict: bool = False) -> tuple[Manuscript, int]:
    """Remove control characters a document file cannot hold and say how many went.

    With `strict`, refuse instead and name the first place, so a writer can find and fix it."""
    removed = 0
    sections = []
    fields = [("the title", manuscript.title), ("the author", manuscript.author)]
    for where, text in fields:
        removed += _count_or_raise(text, where, strict)
    for index, section in enumerate(manuscript.sections, start=1):
        name = f"section {index} ({section.title or 'untitled'})"
        removed += _count_or_raise(section.title, f"the title of {name}", strict)
        removed += _count_or_raise(section.body, name, strict)
        sections.append(
            replace(
                section,
                title=strip_xml_illegal(section.title),
                body=strip_xml_illegal(section.body),
            )
        )
    clean = replace(
        manuscript,
        title=strip_xml_illegal(manuscript.title),
        author=strip_xml_illegal(manuscript.author),
        sections=sections,
    )
    return clean, removed


def check_matter(matter: BookMatter, strict: bool = False) -> tuple[BookMatter, int]:
    """`check_text` for the front and back matter an export was given."""
    removed = 0
    fields = {}
    for name in ("copyright", "dedication", "back_title", "back_matter"):
        text = getattr(matter, name)
        removed += _count_or_raise(text, f"the {name.replace('_', ' ')}", strict)
        fields[name] = strip_xml_illegal(text)
    return replace(matter, **fields), removed


def _count_or_raise(text: str, where: str, strict: bool) -> int:
    match = _XML_ILLEGAL.search(text)
    if match is None:
        return 0
    if strict:
        line = text.count("\n", 0, match.start()) + 1
        raise UserError(
            f"Control character U+{ord(match.group()):04X} in {where}, line {line}, "
            "cannot be exported; remove it or export without --strict to drop it"
        )
    return xml_illegal_count(text)


def manuscript_from_project(proj, doc_ids=None) -> Manuscript:
    """Build a manuscript from an open store project: everything, or the chosen documents with
    everything below them, in the project's own depth-first order.

    Levels are made relative to the shallowest document taken, so exporting one chapter makes
    it a top-level heading."""
    docs = list(proj.documents())
    if doc_ids is not None:
        wanted = {str(i) for i in doc_ids}
        known = {str(d.id) for d in docs}
        missing = sorted(wanted - known)
        if missing:
            raise UserError(f"No document with id {', '.join(missing)} in this project")
        taken: set[str] = set()
        chosen = []
        for doc in docs:  # depth-first: a parent always comes before its children
            key = str(doc.id)
            if key in wanted or (doc.parent_id is not None and str(doc.parent_id) in taken):
                taken.add(key)
                chosen.append(doc)
        docs = chosen
    base = min((d.depth for d in docs), default=0)
    sections = [
        Section(
            level=d.depth - base + 1,
            title=d.title or "",
            body=d.text or "",
            kind=d.kind or "section",
            id=str(d.id),
        )
        for d in docs
    ]
    meta = proj.meta or {}
    return Manuscript(
        title=meta.get("title") or "",
        author=meta.get("author") or "",
        sections=sections,
        identity=meta.get("created") or "",
    )


def opens_with_scene_break(section: Section, style: str) -> bool:
    """Whether a section opens with a scene break (after text) instead of a heading: every
    scene in a book style, as a printed novel sets scenes apart without titles, and an
    untitled scene in any style (an 'Untitled' heading says nothing). The one rule of every
    exporter, so a Markdown file and a Word document of the same book agree."""
    return section.kind == "scene" and (style in BOOK_STYLES or not section.title.strip())


def chapter_starts(sections: list[Section]) -> list[bool]:
    """For each section, whether it begins a chapter: a part or chapter where the tree has
    them, else a top-level document; never a scene. Word starts a new page there, an e-book a
    new file."""
    has_chapters = any(s.kind in CHAPTER_KINDS for s in sections)
    return [
        (s.kind in CHAPTER_KINDS if has_chapters else s.level == 1) and s.kind != "scene"
        for s in sections
    ]


def fallback_title(section: Section, number: int) -> str:
    """What a heading says when its document has no title: 'Chapter 3', 'Part 2', 'Untitled'."""
    if section.title.strip():
        return section.title.strip()
    if section.kind in CHAPTER_KINDS:
        return f"{section.kind.capitalize()} {number}"
    return "Untitled"

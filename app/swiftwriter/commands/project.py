"""`swiftwriter project ACTION PROJECT`: make, list, import into and inspect project files
headless; every listing also as JSON (`--json`: nothing else on stdout).

Commands that only read open the project read-only, so they also work while the app has it
open; `swiftwriter generate PROJECT DOC` writes into one."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from swiftwriter.commands.common import add_encoding, print_json
from swiftwriter.errors import UserError, printable
from swiftwriter.store import Project, backups
from swiftwriter.store.importing import import_sections
from swiftwriter.store.worldinfo import read_world_info

JSON_HELP = "print the listing as JSON (nothing else on stdout)"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("project", help="create, list, import into and inspect projects")
    psub = parser.add_subparsers(dest="project_cmd", metavar="ACTION")
    for register_actions in _ACTION_GROUPS:  # in this order: --help lists them as they come
        register_actions(psub)
    parser.set_defaults(func=run, project_parser=parser)


def _action(psub, name: str, help: str, *, listing: bool = False) -> argparse.ArgumentParser:
    """An ACTION on one PROJECT file; a listing (`listing`) also prints as JSON (--json)."""
    action = psub.add_parser(name, help=help)
    action.add_argument("file", metavar="PROJECT")
    if listing:
        action.add_argument("--json", action="store_true", help=JSON_HELP)
    return action


def _register_documents(psub) -> None:
    """new, docs, show and import: the project and its documents."""
    new = _action(psub, "new", "create a new project file")
    new.add_argument("--title", default="", help="the work's title (default: the file name)")
    new.add_argument("--author", default="")
    _action(psub, "docs", "list the documents as a tree", listing=True)
    show = _action(psub, "show", "print one document's text")
    show.add_argument("doc", help="document id or exact title")
    imp = _action(psub, "import", "add .md, .txt or .docx files as documents (all of them or none)")
    imp.add_argument("sources", nargs="+", metavar="SOURCE")
    add_encoding(imp)
    imp.add_argument("--parent", help="put the new documents under this document")


def _register_backups(psub) -> None:
    """backup, backups and restore."""
    _action(psub, "backup", "make a backup copy now (in the data folder)")
    _action(psub, "backups", "list the project's backups, newest first", listing=True)
    restore = psub.add_parser("restore", help="make a new project from a backup")
    restore.add_argument("backup", help="a backup file (see `swiftwriter project backups`)")
    restore.add_argument("new", help="the new project file (never an existing one)")


def _register_history(psub) -> None:
    """history and recover: the generations recorded in the project."""
    hist = _action(psub, "history", "list generations (and interrupted ones)")
    hist.add_argument("--doc", help="only this document's generations")
    hist.add_argument("--json", action="store_true", help=JSON_HELP)
    rec = _action(psub, "recover", "close an interrupted generation, keeping its text")
    rec.add_argument("generation", type=int)
    rec.add_argument(
        "--discard",
        action="store_true",
        help="do not append its text to the document (it stays in the history)",
    )


def _register_lore(psub) -> None:
    lore = psub.add_parser("lore", help="list the lorebook, or import a world-info file into it")
    lsub = lore.add_subparsers(dest="lore_cmd", metavar="ACTION")
    _action(lsub, "list", "list the lorebook's entries, highest priority first", listing=True)
    imp = _action(
        lsub, "import", "add a KoboldAI or SillyTavern world-info file (.json; all or nothing)"
    )
    imp.add_argument("source", metavar="FILE")
    lore.set_defaults(lore_parser=lore)


def _register_summary(psub) -> None:
    """summary: a document's rolling summary, and whether the project keeps them."""
    summary = _action(
        psub,
        "summary",
        "show or edit a document's rolling summary, or switch rolling summaries on or off",
    )
    summary.add_argument("doc", nargs="?", help="document id or exact title")
    summary.add_argument(
        "--set", metavar="TEXT", help="write the summary (an empty text clears it)"
    )
    summary.add_argument(
        "--rolling",
        choices=("on", "off"),
        help="whether the model summarises what slides out of a take's window (on by default)",
    )


_ACTION_GROUPS = (
    _register_documents,
    _register_backups,
    _register_history,
    _register_lore,
    _register_summary,
)


def find_document(proj, ref: str) -> int:
    """A document by id, or by its exact title (case-insensitive) when that is unambiguous."""
    docs = proj.documents(texts=False)  # titles alone: a document may be very long
    if ref.strip().isdigit():
        doc_id = int(ref)
        if any(d.id == doc_id for d in docs):
            return doc_id
    matches = [d for d in docs if d.title.casefold() == ref.strip().casefold()]
    if len(matches) == 1:
        return matches[0].id
    if matches:
        ids = ", ".join(str(d.id) for d in matches)
        raise UserError(f"Several documents are titled '{ref}' (ids {ids}): give the id")
    raise UserError(f"No document '{ref}' in {proj.path.name}: see `swiftwriter project docs`")


def run(args: argparse.Namespace) -> int:
    cmd = args.project_cmd
    if cmd is None:
        args.project_parser.print_help()
        return 0
    if cmd == "new":
        path = Path(args.file).expanduser()
        title = args.title.strip() or path.stem
        with Project.create(path, title=title, author=args.author) as proj:
            print(f"Created {proj.path} ('{title}')")
        return 0
    if cmd in ("backups", "restore"):
        return _backups(args) if cmd == "backups" else _restore(args)
    if cmd == "lore":
        return _lore(args)
    if cmd == "summary":
        return _summary(args)
    if cmd in ("docs", "show", "history", "backup"):
        if cmd == "backup":
            with Project.open(args.file, readonly=True) as proj:
                made = proj.backup()
            print(f"Backed up {proj.path.name} to {made.path}")
            return 0
        with Project.open(args.file, readonly=True) as proj:
            return {"docs": _docs, "show": _show, "history": _history}[cmd](proj, args)
    with Project.open(args.file) as proj:
        return {"import": _import, "recover": _recover}[cmd](proj, args)


def _backups(args) -> int:
    path = Path(args.file).expanduser()
    found = backups.list_backups(path)
    if args.json:
        checked = [(b, backups.verify(b.path)) for b in found]
        rows = [{"path": str(b.path), "made": b.made.isoformat(timespec="seconds"),
                 "bytes": b.size, "checksum_ok": ok} for b, ok in checked]  # fmt: skip
        print_json(rows)
        return 0
    if not found:
        print(f"No backups of {path.name} yet (they are made on close and while you write; "
              "`swiftwriter project backup` makes one now)")  # fmt: skip
    for b in found:
        print(b.describe())
    return 0


def _restore(args) -> int:
    new = backups.restore(Path(args.backup), Path(args.new))
    print(f"Restored {Path(args.backup).name} as {new}")
    return 0


def _docs(proj, args) -> int:
    docs = proj.documents()
    meta = proj.meta
    if args.json:
        print_json(
            {
                "title": meta.get("title") or proj.path.stem,
                "author": meta.get("author") or "",
                "documents": [_document_row(d) for d in docs],
            }
        )
        return 0
    print(
        printable(meta.get("title") or proj.path.stem)
        + (f" by {printable(meta['author'])}" if meta.get("author") else "")
    )
    if not docs:
        print("  (no documents yet: `swiftwriter project import` adds some)")
    for d in docs:
        words = len(d.text.split())
        print(f"{d.id:>5}  {'  ' * d.depth}{printable(d.title)}  [{d.kind}, {words} words]")
    return 0


def _document_row(d) -> dict:
    words = len(d.text.split())
    return {"id": d.id, "parent_id": d.parent_id, "depth": d.depth, "kind": d.kind,
            "title": d.title, "words": words}  # fmt: skip


def _show(proj, args) -> int:
    text = proj.document(find_document(proj, args.doc)).text
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    return 0


def _import(proj, args) -> int:
    from swiftwriter.export.importers import import_file  # lazy: pulls in docx

    parent = find_document(proj, args.parent) if args.parent else None
    # every file read before anything is added: a bad one leaves the project as it was
    read = [import_file(Path(source), encoding=args.encoding) for source in args.sources]
    with proj.batch():
        added = [d for sections in read for d in import_sections(proj, sections, parent)]
    words = sum(len(d.text.split()) for d in added)
    files = f" from {len(read)} files" if len(read) > 1 else ""
    print(
        f"Imported {len(added)} document(s), {words} words,{files} into {printable(proj.path.name)}"
    )
    return 0


def _lore(args) -> int:
    if args.lore_cmd is None:
        args.lore_parser.print_help()
        return 0
    if args.lore_cmd == "list":
        with Project.open(args.file, readonly=True) as proj:
            entries = proj.lore_entries()
        if args.json:
            print_json([_lore_row(e) for e in entries])
        elif not entries:
            print("The lorebook is empty: `swiftwriter project lore import` adds entries")
        for e in [] if args.json else entries:
            marks = ", ".join(m for m, on in (("pinned", e.pinned), ("off", not e.enabled)) if on)
            keys = ", ".join(e.keys) or "no keys"
            line = f"{e.id:>5}  {e.title}  [{keys}]  priority {e.priority}"
            print(printable(line + (f"  ({marks})" if marks else "")))
        return 0
    read = read_world_info(args.source)  # the whole file checked before the project is opened
    with Project.open(args.file) as proj:
        added = proj.add_lore_entries(read.entries)
    said = f"Imported {len(added)} lorebook entries into {printable(proj.path.name)}"
    if read.regex_keys:
        said += f" ({read.regex_keys} regular-expression keys left out: keys here are words)"
    print(said)
    return 0


def _summary(args) -> int:
    """A document's rolling summary shown or written; the project's setting shown or switched."""
    if args.doc is None and args.set is not None:
        raise UserError("--set goes with a DOC: the summary is a document's")
    writes = args.set is not None or args.rolling is not None
    with Project.open(args.file, readonly=not writes) as proj:
        if args.rolling is not None:
            proj.set_rolling_summary(args.rolling == "on")
        state = "on" if proj.rolling_summary else "off"
        if args.doc is None:
            print(f"Rolling summaries are {state} in {printable(proj.path.name)}")
            return 0
        doc_id = find_document(proj, args.doc)
        if args.set is not None:
            proj.set_summary(doc_id, args.set)
        summary = proj.summary(doc_id)
    if not summary.text:
        print(f"No rolling summary yet (rolling summaries are {state})")
        return 0
    who = "the model" if summary.source == "model" else "the writer"
    print(summary.text)
    print(f"(last written by {who}; rolling summaries are {state})")
    return 0


def _lore_row(e) -> dict:
    return {"id": e.id, "title": e.title, "keys": list(e.keys), "content": e.content,
            "pinned": e.pinned, "priority": e.priority, "enabled": e.enabled}  # fmt: skip


def _history(proj, args) -> int:
    doc_id = find_document(proj, args.doc) if args.doc else None
    titles = {d.id: d.title for d in proj.documents()}
    gens = proj.generations(doc_id)
    if args.json:
        lost = {g.id for g in proj.interrupted_generations()}
        print_json([_generation_row(g, titles, g.id in lost) for g in gens])
        return 0
    if not gens:
        print("No generations yet.")
    for g in gens:
        stats = g.stats or {}
        speed = (
            f"tau {stats.get('tau', 0):.2f}, {stats.get('tokens_per_s', 0):.1f} tok/s"
            if stats
            else ""
        )
        print(
            f"#{g.id:<4} {g.started[:19]}  {g.status:9}  {g.n_tokens:>6} tokens  "
            f"{titles.get(g.doc_id, f'document {g.doc_id} (deleted)')}  {g.model_id}  {speed}".rstrip()
        )
    interrupted = proj.interrupted_generations()
    if interrupted:
        ids = ", ".join(f"#{g.id}" for g in interrupted)
        print(
            f"\n{len(interrupted)} interrupted generation(s) ({ids}) can be recovered: "
            f"swiftwriter project recover {args.file} ID"
        )
    return 0


def _generation_row(g, titles: dict, interrupted: bool) -> dict:
    return {
        "id": g.id,
        "doc_id": g.doc_id,
        "document": titles.get(g.doc_id),  # None: the document was deleted
        "status": g.status,
        "interrupted": interrupted,  # `swiftwriter project recover` can close it
        "started": g.started,
        "finished": g.finished,
        "tokens": g.n_tokens,
        "model": g.model_id,
        "applied": g.applied,
        "stats": g.stats or {},
    }


def _recover(proj, args) -> int:
    gen = proj.recover_generation(args.generation, append=not args.discard)
    where = "appended to its document" if gen.applied else "kept in the history only"
    print(
        f"Recovered generation #{gen.id}: {gen.n_tokens} tokens, {len(gen.text)} characters, {where}"
    )
    return 0

"""The lorebook's part of the prompt: an entry enters exactly when one of its keys is in the
scanned window (the end of the text before the cursor, and the direction) and leaves when it
is not; pinned ones always; by priority within the budget; the viewer says which fired and
why; the standing author's note sits at its depth."""

from __future__ import annotations

from swiftwriter.lorebook import (
    AuthorsNote,
    Lorebook,
    choose,
    choose_entries,
    entry_text,
    note_at_depth,
    scanned_window,
)
from swiftwriter.store import LoreEntry, Project
from swiftwriter.writing.context import assemble

from tests.writing.test_context import decode, encode, session_for

FILLER = "The tide turned over the grey stones of the quay. " * 3  # 150 characters, no keys


def entry(id_, title, keys=(), content=None, priority=0, pinned=False, enabled=True):
    text = content if content is not None else f"{title} is known here."
    return LoreEntry(id_, title, tuple(keys), text, pinned, priority, enabled)


def count_chars(text: str) -> int:
    return len(text)


ELENA = entry(1, "Elena", ["Elena", "the keeper"], "Elena keeps the harbour light.")


def fired(book, text, direction="", room=10_000):
    chosen = choose(book, text, direction, count_chars, room)
    return [(f.entry.title, f.why) for f in chosen.fired]


def test_an_entry_enters_exactly_while_its_key_is_in_the_scanned_window():
    book = Lorebook((ELENA,), scan=100, budget=1000)
    assert fired(book, FILLER + "Then Elena came.") == [("Elena", 'key "Elena"')]
    assert fired(book, FILLER + "then THE KEEPER came") == [("Elena", 'key "the keeper"')]
    # written on: the name scrolls out of the last 100 characters, and the entry leaves
    assert fired(book, "Then Elena came. " + FILLER) == []
    assert fired(Lorebook((ELENA,), scan=200), "Then Elena came. " + FILLER) != []
    # whole words only: a longer word, or the tail of a word cut at the window's start
    assert fired(book, FILLER + "Elenas and Helena") == []
    lena = Lorebook((entry(2, "Lena", ["lena"]),), scan=100)
    text = "Magdalena " + "y" * 95  # the last 100 characters begin "lena y…"
    assert scanned_window(text, 100) == " " + "y" * 95 and fired(lena, text) == []
    assert fired(lena, "Lena " + "y" * 95) != []  # a whole word at the window's start
    # the take's direction is searched too
    assert fired(book, FILLER, direction="Elena finds the letter.") == [("Elena", 'key "Elena"')]


def test_keys_are_words_never_patterns():
    book = Lorebook((entry(1, "Odd", [".*", "a+b", "(x"]),), scan=1000)
    assert fired(book, "anything at all, aab and x") == []
    assert fired(book, "it was a+b, plainly") == [("Odd", 'key "a+b"')]


def test_pinned_always_disabled_and_empty_never():
    book = Lorebook((
        entry(1, "Town", pinned=True),
        entry(2, "Off", ["Elena"], enabled=False),
        entry(3, "Blank", ["Elena"], content="  "),
    ))  # fmt: skip
    assert fired(book, "Nothing here.") == [("Town", "pinned")]
    assert fired(book, "Elena came.") == [("Town", "pinned")]


def test_priority_orders_the_entries_and_the_budget_cuts_the_lowest():
    entries = [entry(1, "Low", ["sea"], "a" * 20, priority=1),
               entry(2, "High", ["sea"], "b" * 20, priority=9),
               entry(3, "Mid", ["sea"], "c" * 20, priority=5),
               entry(4, "Tiny", ["sea"], "d", priority=0)]  # fmt: skip
    cost = len(entry_text(entries[0]))  # 22 characters each with its blank line
    kept, left = choose_entries(entries, "the sea", 2 * cost + 5, count_chars)
    assert [f.entry.title for f in kept] == ["High", "Mid"]
    # past the budget the rest wait, even one small enough to fit: priority is never skipped
    assert [f.entry.title for f in left] == ["Low", "Tiny"]
    assert sum(f.tokens for f in kept) <= 2 * cost + 5
    # ties go to the older entry; a budget of nothing takes nothing
    tie = [entry(5, "Newer", ["sea"]), entry(4, "Older", ["sea"])]
    assert [f.entry.title for f in choose_entries(tie, "sea", 999, count_chars)[0]] == [
        "Older", "Newer"]  # fmt: skip
    assert choose_entries(entries, "sea", 0, count_chars)[0] == []


def test_the_prompt_takes_the_fired_entries_after_memory_within_the_budget():
    book = Lorebook((ELENA, entry(2, "Tom", ["Tom"], "Tom runs cargo.")), scan=100, budget=100)
    text = FILLER + "Elena climbed the tower."
    built = assemble(encode, 4000, "A harbour town.\n\n", [], text, lore=book)
    prompt = decode(built.ids)
    assert prompt.startswith("A harbour town.\n\nElena keeps the harbour light.\n\n" + FILLER)
    assert "Tom runs cargo" not in prompt
    assert built.pinned == len(
        encode("A harbour town.\n\n" + entry_text(ELENA))
    )  # kept when sliding
    shown = built.render()
    assert "lorebook entries that fired" in shown and 'Elena: key "Elena"' in shown
    assert [f.entry.title for f in built.lore.fired] == ["Elena"]
    # written on past the name: the entry leaves the prompt, and the viewer says none fired
    later = assemble(encode, 4000, "A harbour town.\n\n", [], text + " " + FILLER, lore=book)
    assert "Elena keeps" not in decode(later.ids) and "no entry fired" in later.render()
    # a budget smaller than the entry: left out, and the viewer says so
    tight = Lorebook(book.entries, scan=100, budget=10)
    cut = assemble(encode, 4000, "", [], text, lore=tight)
    assert "Elena keeps" not in decode(cut.ids)
    assert "left out past the budget: Elena" in cut.render()
    # the lorebook shares memory's half of a small context, never the text's
    small = assemble(encode, 80, "m" * 30, [], "Elena " + "x" * 200, lore=Lorebook((ELENA,)))
    assert len(small.ids) <= 80 and small.lore.fired == []


def test_the_standing_authors_note_sits_at_its_depth():
    text = "One.\n\nTwo.\nThree.\n\nFour."
    assert (
        note_at_depth(text, "Rain.", 2) == "One.\n\nTwo.\n[Author's note: Rain.]\nThree.\n\nFour."
    )
    assert note_at_depth(text, "Rain.", 9).startswith("[Author's note: Rain.]\nOne.")
    built = assemble(encode, 4000, "", [], text, note=AuthorsNote("Rain.", 1))
    assert decode(built.ids).endswith("Three.\n\n[Author's note: Rain.]\nFour.")
    assert "standing author's note, 1 paragraphs above the end" in built.render()
    both = decode(assemble(encode, 4000, "", [], text, "The bell rings.",
                           note=AuthorsNote("Rain.", 1)).ids)  # fmt: skip
    assert "[Author's note: Rain.]" in both and "[Author's note: The bell rings.]" in both


def test_a_take_reads_the_projects_lorebook_and_note(tmp_path):
    path = tmp_path / "Lore.swiftwriter"
    with Project.create(path) as p:
        doc = p.add_document("One", "Morning. Elena opened the door.")
        p.add_lore_entry("Elena", "Elena keeps the harbour light.", keys="Elena")
        p.add_lore_entry("Tom", "Tom runs cargo.", keys="Tom")
        p.set_authors_note("Keep it quiet.", 1)
        prompt = decode(session_for(p, doc.id).build_prompt())
        assert prompt.startswith("Elena keeps the harbour light.\n\n")
        assert "Tom runs" not in prompt
        assert prompt.endswith("[Author's note: Keep it quiet.]\nMorning. Elena opened the door.")

"""The story context: memory, earlier documents in tree order (synopses where they fit better),
the text before the cursor and the direction, within the budget and reported when cut; the
viewer shows the ids the engine receives; chat templates and author's notes."""

from __future__ import annotations

import pytest
from swiftwriter.engine import SamplingSettings
from swiftwriter.store import Project
from swiftwriter.store.texts import string_excerpt
from swiftwriter.writing.context import assemble, fitted, with_authors_note
from swiftwriter.writing.endings import TakeEnding
from swiftwriter.writing.session import DocumentSession

from tests.conftest import build_tiny
from tests.writing.test_session import Latin1Tokenizer

GREEDY = SamplingSettings(greedy=True, penalty=1.0)


def encode(text):
    return list(text.encode("latin-1"))


def decode(ids):
    return bytes(ids).decode("latin-1")


@pytest.fixture
def novel(tmp_path):
    path = tmp_path / "Novel.swiftwriter"
    with Project.create(path, title="Novel") as p:
        p.set_memory("A quiet harbour town; Elena is the keeper.")
        one = p.add_document("Chapter 1", "Elena climbed the tower. " * 4)
        p.add_document("Chapter 2", "The storm came at dusk. " * 4)
        three = p.add_document("Chapter 3", "Morning. The sea was calm.")
    return path, one.id, three.id


def session_for(project, doc_id, positions=4096, **kwargs):
    model = build_tiny("llama", seed=5, max_positions=positions)
    return DocumentSession(project, doc_id, model=model, tokenizer=Latin1Tokenizer(),
                           sampling=GREEDY, ending=TakeEnding.exact(16), **kwargs)  # fmt: skip


def test_chapter_three_sees_chapters_one_and_two_in_order_within_the_budget(novel):
    path, one, three = novel
    with Project.open(path) as p:
        prompt = decode(session_for(p, three, story_mode="fit").build_prompt())
        assert prompt.startswith("A quiet harbour town")
        a, b, c = (prompt.index(s) for s in ("Elena climbed", "The storm came", "Morning."))
        assert a < b < c and prompt.endswith("The sea was calm.")
        previous = decode(session_for(p, three, story_mode="previous").build_prompt())
        assert "The storm came" in previous and "Elena climbed" not in previous
        none = decode(session_for(p, three, story_mode="none").build_prompt())
        assert "The storm" not in none and "Elena" in none  # the memory names her
        # a small context: chapter 1 is cut to its end or left out, and the report says so
        small = session_for(p, three, positions=200, story_mode="fit").story_context()
        assert len(small.ids) <= 200 - 16 - 1
        story = next(part for part in small.parts if part.name == "story")
        assert story.shortened and "The storm came at dusk." in decode(small.ids)
        # a synopsis stands in for the text
        p.set_synopsis(one, "Elena finds a letter.")
        with_synopsis = decode(session_for(p, three, story_mode="fit").build_prompt())
        assert "Elena finds a letter." in with_synopsis and "Elena climbed" not in with_synopsis


def test_the_viewer_shows_the_ids_the_engine_receives(novel, monkeypatch):
    from swiftwriter.engine.decoding.generator import Generator

    path, _, three = novel
    seen = []
    real = Generator.generate

    def spy(self, prompt_ids, *args, **kwargs):
        seen.append(list(prompt_ids))
        return real(self, prompt_ids, *args, **kwargs)

    monkeypatch.setattr(Generator, "generate", spy)
    with Project.open(path) as p:
        session = session_for(p, three, story_mode="fit", direction="The bell rings.")
        shown = session.story_context()
        session.run()
        assert seen == [shown.ids]
        text = shown.render()
        for label in ("memory and pinned notes", "earlier documents", "before the cursor",
                      "direction (an author's note"):  # fmt: skip
            assert label in text
        assert f"total: {len(shown.ids):,} tokens" in text
        assert "[Author's note: The bell rings.]" in decode(shown.ids)


def test_a_chat_template_wraps_the_context_and_the_direction():
    calls = []

    def chat(messages):
        calls.append(messages)
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages)
        return encode(text)

    built = assemble(encode, 1000, "Memory.\n\n", [("One", "Earlier text.", "")], "The text",
                     direction="She opens the door.", chat=chat, decode=decode)  # fmt: skip
    wrapped = decode(built.ids)
    assert built.wrapped and wrapped.startswith("<system>You are a writing assistant")
    assert "<user>Memory.\n\nEarlier text.\n\nWhat happens next: She opens the door." in wrapped
    assert wrapped.endswith("<assistant>The text")
    assert built.render().endswith(f"{wrapped}\n=== total: {len(built.ids):,} tokens ===")
    plain = assemble(encode, 1000, "", [], "Line 1\nLine 2\nLine 3\nLine 4", direction="Rain.")
    assert not plain.wrapped
    assert decode(plain.ids) == "Line 1\n[Author's note: Rain.]\nLine 2\nLine 3\nLine 4"
    assert with_authors_note("One line", "x") == "[Author's note: x]\nOne line"


@pytest.fixture
def tiny_cli(novel, monkeypatch):
    """The CLI's model loader returns a tiny model with the Latin-1 tokenizer."""
    from swiftwriter.modelstore import loader, registry
    from swiftwriter.modelstore.loader import LoadedModel
    from swiftwriter.modelstore.registry import ModelEntry

    path = novel[0]
    entry = ModelEntry(id="tiny", name="tiny", source="folder", path=path.parent)
    loaded = LoadedModel(entry=entry, model=build_tiny("llama", seed=5), tokenizer=Latin1Tokenizer(),
                         device="cpu", dtype="float32")  # fmt: skip
    monkeypatch.setattr(registry, "resolve", lambda name: entry)
    monkeypatch.setattr(loader, "load", lambda *a, **k: loaded)
    return novel


def test_the_cli_shows_the_context_and_exits(tiny_cli, capsys):
    from swiftwriter.cli import main

    path, _, three = tiny_cli
    args = ["generate", "--project", str(path), "--doc", "Chapter 3", "--show-context"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "=== earlier documents" in out and "The storm came at dusk." in out
    with Project.open(path, readonly=True) as p:
        assert p.generations() == []  # nothing was generated


def test_the_cli_stops_at_a_stop_sequence_and_keeps_writing(tiny_cli, capsys):
    from swiftwriter.cli import main

    path, _, three = tiny_cli
    base = ["generate", "--project", str(path), "--doc", "Chapter 3", "--no-history",
            "--exact-length", "--preset", "precise"]  # fmt: skip
    assert main([*base, "--max-new-tokens", "60"]) == 0
    free = capsys.readouterr().out.rstrip("\n")
    stop = free[20:23]
    with Project.open(path) as p:  # take the free take back out of the chapter
        p.update_text(three, "Morning. The sea was calm.")
    assert main([*base, "--max-new-tokens", "60", "--stop", stop]) == 0
    cut = capsys.readouterr()
    assert cut.out.rstrip("\n") == free[: free.find(stop) + len(stop)]
    assert main([*base, "--max-new-tokens", "10", "--min-new-tokens", "11"]) == 1
    assert "--min-new-tokens" in capsys.readouterr().err


def numbered(text):
    """Words 'w0 w1 ...' as their numbers; a word cut in two reads as -1."""
    return [int(w[1:]) if w[:1] == "w" and w[1:].isdigit() else -1 for w in text.split()]


LONG = " ".join(f"w{i}" for i in range(1_000_000))  # 6.9 MB


def counting(encode):
    seen: list[int] = []

    def counted(text):
        seen.append(len(text))
        return encode(text)

    return counted, seen


def test_a_long_text_is_tokenized_only_as_far_as_the_room():
    encode, seen = counting(numbered)
    end = fitted(encode, LONG, 100)
    assert end.ids == list(range(999_900, 1_000_000)) and end.cut
    assert 900_000 < end.total < 1_100_000  # estimated from the part read
    start = fitted(encode, LONG, 100, end=False)
    assert start.ids == list(range(100)) and sum(seen) < 4_000
    short = fitted(encode, "w1 w2 w3", 100)
    assert (short.ids, short.total, short.cut) == ([1, 2, 3], 3, False)
    # a text of long tokens: read further, four times as far each time
    spaced = " ".join(f"w{i}" + " " * 60 for i in range(100_000))
    assert fitted(encode, spaced, 50).ids == list(range(99_950, 100_000))


def test_the_story_context_reads_long_texts_only_as_far_as_the_budget():
    encode, seen = counting(numbered)
    asked: list[tuple[str, int]] = []

    def stored(name: str, text: str):
        def read(limit, end):
            asked.append((name, limit))
            return string_excerpt(text, limit, end)

        return read

    story = [(f"Ch {i}", stored(f"ch{i}", LONG), "") for i in range(50)]
    built = assemble(encode, 1000, stored("memory", LONG), story, stored("text", LONG))
    memory, earlier, text = built.parts
    assert memory.ids == list(range(500)) and text.ids == list(range(999_500, 1_000_000))
    assert earlier.ids == [] and "left out: Ch 0, Ch 1" in earlier.shortened
    assert "kept the first 500 of about " in memory.shortened
    assert sum(seen) < 60_000  # of 21 copies of 6.9 MB
    assert max(limit for name, limit in asked if name != "ch49") <= 32_768

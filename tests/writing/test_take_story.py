"""A take with "Keep to the story" bans the marks only chatter writes and the letters of
scripts the writer's text does not use, worked out in the take's own thread (Take.run), and
plain decoding and speculation still write one text."""

from __future__ import annotations

from types import SimpleNamespace

from swiftwriter.engine.decoding.settings import DraftSettings, SamplingSettings
from swiftwriter.store import Project
from swiftwriter.writing.take import Take, TakeRequest

from tests.writing.test_take_words import PieceTokenizer

PIECES = [" w"] * 16
PIECES[3], PIECES[9], PIECES[13], PIECES[14] = ".", " and", " ##", " שלום"  # a heading, Hebrew


def _loaded(model):
    return SimpleNamespace(model=model, tokenizer=PieceTokenizer(PIECES),
                           entry=SimpleNamespace(id="story"), precision=lambda: "float32")  # fmt: skip


def _take(model, drafting: DraftSettings, keep_to_story: bool):
    loaded = _loaded(model)
    request = TakeRequest(None, None, loaded, prompt_text="w w w. w w." * 4, target=120,
                          sampling=SamplingSettings(seed=5), drafting=drafting, history=None,
                          measure_baseline=False, keep_to_story=keep_to_story)  # fmt: skip
    take = Take(request)
    return take, take.run()


def test_keep_to_the_story_bans_in_the_take_and_speculation_stays_exact(tiny_vocab_model):
    _, free = _take(tiny_vocab_model, DraftSettings(), keep_to_story=False)
    assert {13, 14} & set(free.result.token_ids)  # the model writes them when free to
    take, kept = _take(tiny_vocab_model, DraftSettings(), keep_to_story=True)
    assert take.session.sampling.banned_tokens == (13, 14)  # the English text has no Hebrew
    assert not {13, 14} & set(kept.result.token_ids) and len(kept.result.token_ids) >= 120
    _, plain = _take(tiny_vocab_model, DraftSettings.plain(), keep_to_story=True)
    assert plain.result.token_ids == kept.result.token_ids


def test_the_fence_reads_all_the_model_reads_the_notes_too(tiny_vocab_model, tmp_path):
    """A Hebrew name only in a pinned note is the writer's: the take's prompt holds it, so its
    script stays open; without the note it is fenced."""
    bans = {}
    for note in ("", " שלום"):
        path = tmp_path / f"story{len(note)}.swiftwriter"
        with Project.create(path, title="Story") as project:
            doc = project.add_document("One", " w w w. w w." * 4)
            if note:
                project.add_note("Cast", note, pinned=True)
            request = TakeRequest(project, doc.id, _loaded(tiny_vocab_model), prompt_text=None,
                                  target=8, sampling=SamplingSettings(seed=5), history=None,
                                  measure_baseline=False, keep_to_story=True)  # fmt: skip
            take = Take(request)
            assert ("שלום" in take.session.prompt_as_text()) == bool(note)
            take.run()
            bans[note] = take.session.sampling.banned_tokens
    assert bans[""] == (13, 14) and bans[" שלום"] == (13,)

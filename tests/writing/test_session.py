"""One generation into one document: streamed into the store, appended at the end, seeded from
the project's history (incrementally), exact whatever the seeding, and safe when it stops."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from swiftwriter.engine import DraftSettings, SamplingSettings
from swiftwriter.errors import UserError
from swiftwriter.store import Project, ProjectError
from swiftwriter.writing.endings import TakeEnding
from swiftwriter.writing.history import ProjectHistory
from swiftwriter.writing.session import DocumentSession, generate_into_document

from tests.conftest import build_tiny

GREEDY = SamplingSettings(greedy=True, penalty=1.0)


class Latin1Tokenizer:
    """Token id = Latin-1 code point: a lossless text <-> ids mapping for the 256-token models."""

    identity = "latin1-test"
    bos_token_id = 0
    eos_token_id = None

    def __init__(self):
        self.encoded: list[str] = []

    def encode(self, text, add_special_tokens=False):
        self.encoded.append(text)
        return list(text.encode("latin-1"))

    def decode(self, ids, skip_special_tokens=True):
        return bytes(ids).decode("latin-1")


def random_text(seed: int, n: int) -> str:
    rng = random.Random(seed)
    return "".join(chr(rng.randrange(33, 127)) for _ in range(n))


@pytest.fixture
def project(tmp_path):
    proj = Project.create(tmp_path / "Novel.swiftwriter", title="Novel")
    yield proj
    proj.close()


def test_a_generation_streams_appends_and_records(project, tiny_llama):
    doc = project.add_document("Chapter 1", random_text(1, 60))
    project.add_note("Cast", "Tom the cat", pinned=True)
    project.add_note("Unpinned", "not in the prompt")
    tok = Latin1Tokenizer()
    pieces: list[str] = []
    session = DocumentSession(
        project, doc.id, model=tiny_llama, tokenizer=tok, model_id="tiny",
        sampling=GREEDY, ending=TakeEnding.exact(40), flush_interval=0,
        history=ProjectHistory.of(project, tok),
    )  # fmt: skip
    prompt = session.build_prompt()
    assert bytes(prompt).decode("latin-1") == "Cast\nTom the cat\n\n" + doc.text
    result = session.run(on_text=pieces.append)
    gen = project.generation(result.generation.id)
    assert "".join(pieces) == result.text == gen.text and result.text
    assert gen.status == "finished" and gen.applied and gen.model_id == "tiny"
    assert gen.token_ids == result.token_ids and len(gen.token_ids) == result.stats["tokens"]
    assert gen.tokenizer_id == "latin1-test" and gen.settings["ending"]["target"] == 40
    assert gen.settings["written_after"] == doc.text  # where a recovery puts it back
    assert gen.stats["tau"] >= 1.0 and "history" in gen.stats
    assert result.document.text == doc.text + result.text
    assert project.snapshots(doc.id)[0].text == doc.text
    assert set(project.load_ngram_cache("latin1-test")) >= {"meta", "corpus.delta", "sa.delta"}


def test_history_seeding_is_exact_faster_and_incremental(project, tiny_llama, monkeypatch):
    text = random_text(2, 80)  # no repeats: the context's own sources have little to go on
    a, b, c = (project.add_document(t, text) for t in ("A", "B", "C"))
    tok = Latin1Tokenizer()
    first = generate_into_document(
        project, a.id, model=tiny_llama, tokenizer=tok, sampling=GREEDY,
        ending=TakeEnding.exact(60), history=ProjectHistory.of(project, tok),
    )  # fmt: skip
    asked: list[str] = []
    original = Project.history_tokens

    def spy(self, key, tokenize=None):
        asked.append(key)
        return original(self, key, tokenize)

    monkeypatch.setattr(Project, "history_tokens", spy)
    history = ProjectHistory.of(project, tok)
    # Fixed trie sizes: the adaptive sizing follows measured timings, so forward-pass counts
    # would depend on the machine's load; with a fixed budget they measure the drafts alone.
    fixed = DraftSettings(max_nodes=24, adaptive=False)
    seeded = DocumentSession(
        project, b.id, model=tiny_llama, tokenizer=tok, sampling=GREEDY,
        ending=TakeEnding.exact(60), history=history, drafting=fixed,
    ).run()  # fmt: skip
    assert asked == [f"d{a.id}"]  # only the document that changed, read from the stored cache
    plain = generate_into_document(
        project, c.id, model=tiny_llama, tokenizer=tok, sampling=GREEDY,
        ending=TakeEnding.exact(60), history=None, drafting=fixed,
    )  # fmt: skip
    assert seeded.token_ids == plain.token_ids == first.token_ids  # same prompt, exact output
    by_source = seeded.stats["accepted_by_source"]
    assert sum(n for name, n in by_source.items() if "history" in name) > 10
    assert seeded.stats["forward_passes"] < plain.stats["forward_passes"]
    assert "history" not in plain.stats


def test_cancel_keeps_the_text_and_a_failure_keeps_the_document(project):
    model = build_tiny("llama", seed=4)
    doc = project.add_document("Chapter", random_text(3, 40))
    tok = Latin1Tokenizer()
    calls = [0]

    def stop_after_three():
        calls[0] += 1
        return calls[0] > 3

    session = DocumentSession(
        project, doc.id, model=model, tokenizer=tok, sampling=GREEDY,
        drafting=DraftSettings.plain(), ending=TakeEnding.exact(50),
        history=ProjectHistory.of(project, tok),
    )  # fmt: skip
    cancelled = session.run(should_stop=stop_after_three)
    assert cancelled.generation.status == "cancelled" and len(cancelled.token_ids) == 3
    after_cancel = doc.text + cancelled.text
    assert project.document(doc.id).text == after_cancel

    embed = model.get_input_embeddings()  # every engine path (stock or lean pass) embeds first
    forward = embed.forward
    passes = [0]

    def failing_forward(*args, **kwargs):
        passes[0] += 1
        if passes[0] > 6:
            raise RuntimeError("device lost")
        return forward(*args, **kwargs)

    embed.forward = failing_forward
    with pytest.raises(RuntimeError, match="device lost"):
        DocumentSession(
            project, doc.id, model=model, tokenizer=tok, sampling=GREEDY,
            drafting=DraftSettings.plain(), ending=TakeEnding.exact(50), flush_interval=0,
            history=ProjectHistory.of(project, tok),
        ).run()  # fmt: skip
    del embed.forward
    failed = project.generations(doc.id)[-1]
    assert failed.status == "failed" and "device lost" in failed.error
    assert failed.n_tokens > 0 and not failed.applied
    assert project.document(doc.id).text == after_cancel

    def interrupt(piece):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        DocumentSession(
            project,
            doc.id,
            model=model,
            tokenizer=tok,
            sampling=GREEDY,
            ending=TakeEnding.exact(20),
            history=ProjectHistory.of(project, tok),
        ).run(on_text=interrupt)
    stopped = project.generations(doc.id)[-1]
    assert stopped.status == "cancelled" and stopped.applied
    assert project.document(doc.id).text == after_cancel + stopped.text
    assert project.interrupted_generations() == []


def test_bad_requests_fail_before_any_work(project, tmp_path, tiny_llama):
    doc = project.add_document("Chapter", "text")
    tok = Latin1Tokenizer()
    with pytest.raises(ProjectError, match="No document with id 99"):
        DocumentSession(project, 99, model=tiny_llama, tokenizer=tok)
    with pytest.raises(UserError, match="at least 1"):
        DocumentSession(
            project, doc.id, model=tiny_llama, tokenizer=tok, ending=TakeEnding.exact(0)
        )
    with pytest.raises(UserError, match="model and its tokenizer"):
        DocumentSession(project, doc.id, model=tiny_llama)
    with (
        Project.open(project.path, readonly=True) as view,
        pytest.raises(ProjectError, match="read-only"),
    ):
        DocumentSession(view, doc.id, model=tiny_llama, tokenizer=tok)
    assert project.generations() == []


def test_a_long_document_keeps_the_notes_and_its_end(project):
    model = build_tiny("llama", seed=5, max_positions=64)
    doc = project.add_document("Chapter", random_text(6, 500))
    project.add_note("Style", "short", pinned=True)
    tok = Latin1Tokenizer()
    session = DocumentSession(
        project, doc.id, model=model, tokenizer=tok, sampling=GREEDY, ending=TakeEnding.exact(16),
        history=ProjectHistory.of(project, tok),
    )  # fmt: skip
    prompt = bytes(session.build_prompt()).decode("latin-1")
    assert len(prompt) == 64 - 16 - 1
    assert prompt.startswith("Style\nshort\n\n") and doc.text.endswith(
        prompt[len("Style\nshort\n\n") :]
    )
    result = session.run()
    assert 1 <= len(result.token_ids) <= 16


def test_the_slide_policy_keeps_the_pinned_notes_and_writes_past_the_context(project, monkeypatch):
    from swiftwriter.engine.decoding.generator import Generator
    from swiftwriter.engine.decoding.settings import ContextSettings

    model = build_tiny("llama", seed=5, max_positions=64)
    doc = project.add_document("Chapter", random_text(7, 40))
    project.add_note("Style", "short", pinned=True)
    seen: list[dict] = []
    real = Generator.generate

    def spy(self, prompt_ids, max_new_tokens, **kwargs):
        seen.append({"context": self.context, **kwargs})
        yield from real(self, prompt_ids, max_new_tokens, **kwargs)

    monkeypatch.setattr(Generator, "generate", spy)
    tok = Latin1Tokenizer()
    slide = ContextSettings(policy="slide", sink=4)
    session = DocumentSession(
        project, doc.id, model=model, tokenizer=tok, sampling=GREEDY, ending=TakeEnding.exact(80),
        flush_interval=0, context=slide,
    )  # fmt: skip
    result = session.run()
    assert bytes(seen[0]["pinned_ids"]).decode("latin-1") == "Style\nshort\n\n"
    assert seen[0]["context"].policy == "slide"
    assert len(result.token_ids) == 80  # past the 64-token context
    assert result.stats["windowed_from"] is not None and result.stats["shifts"] >= 1
    assert result.generation.settings["context"]["policy"] == "slide"
    stop = DocumentSession(
        project, doc.id, model=model, tokenizer=tok, sampling=GREEDY, ending=TakeEnding.exact(80),
        flush_interval=0,
    )  # fmt: skip
    assert stop.context.policy == "stop"
    assert stop.run().stats["stop_reason"] == "context_full"


def test_a_take_that_breaks_down_stops_there_with_the_reason(tiny_llama, monkeypatch):
    """The default model's prose reads at 1.5-2.5 nats a token; a random tiny model sampled at
    temperature 3 writes near-uniform ids of its 256, at about 5.7: word salad by the guard's
    measure. The take stops after two such pieces of 512 tokens, its text kept, the reason
    given; a take asked for less than two pieces is never judged, nor one that reads as
    the model's own likely text (its greedy text here: about 3.1)."""
    from swiftwriter.engine.decoding.stats import SURPRISE_PIECE
    from swiftwriter.writing import guards

    assert guards.broke_down([2.0, 4.5, 4.1]) and not guards.broke_down([4.5, 3.9])
    assert not guards.broke_down([9.0])
    from swiftwriter.engine.decoding.settings import ContextSettings
    from swiftwriter.writing.session import PromptSession

    salad = SamplingSettings(greedy=False, temperature=3.0, penalty=1.0, seed=1)

    def session(n, sampling=salad):
        return PromptSession(
            model=tiny_llama, tokenizer=Latin1Tokenizer(), prompt_ids=[5, 9, 12],
            sampling=sampling, drafting=DraftSettings.plain(), ending=TakeEnding.exact(n, min_new_tokens=n),
            context=ContextSettings(policy="slide"),  # the tiny model's context is short
        )  # fmt: skip

    result = session(4 * SURPRISE_PIECE).run()
    assert result.stats["stop_reason"] == "broke_down" and result.status == "finished"
    assert all(n > guards.BREAKDOWN_NATS for n in result.stats["surprise_by_piece"][-2:])
    assert 2 * SURPRISE_PIECE <= len(result.token_ids) < 4 * SURPRISE_PIECE
    assert session(SURPRISE_PIECE + 10).run().stats["stop_reason"] != "broke_down"
    likely = session(3 * SURPRISE_PIECE, SamplingSettings(greedy=True, penalty=1.0)).run()
    assert (
        likely.stats["stop_reason"] != "broke_down" and len(likely.token_ids) == 3 * SURPRISE_PIECE
    )


def test_a_take_that_leaves_its_prompt_s_scripts_has_broken_down():
    """Letter soup reads as likely to the model (the app's kitchen take: 1.4-3.0 nats a token
    in Hebrew and full-width characters), so the script gives it away: most letters of the last
    2,000 characters in scripts the prompt hardly uses."""
    from swiftwriter.engine.decoding.scripts import scripts_of
    from swiftwriter.writing.guards import SCRIPT_SPAN, left_its_scripts

    english = "Claire did not look up from the sink. " * 60
    assert scripts_of(english) == {"LATIN"}
    assert scripts_of("Der Bär sagte: «Привет», und ging. " * 9) == {"LATIN", "CYRILLIC"}
    soup = english[:900] + "עמעצםעמןעם ＶＨＩＨ×ＨＨ " * 120
    assert not left_its_scripts(english[:SCRIPT_SPAN], {"LATIN"})
    assert left_its_scripts(soup[-SCRIPT_SPAN:], {"LATIN"})
    assert not left_its_scripts(soup[:1500], {"LATIN"})  # too short to judge
    names = english[:1800] + " Ярослав и Мария ответили. " * 10  # a few foreign names: fine
    assert not left_its_scripts(names[-SCRIPT_SPAN:], {"LATIN"})


def test_symbol_soup_in_the_writers_own_script_has_broken_down():
    """The app's 50,000-word take ended in symbols, full-width digits and katakana among Latin
    capitals: mostly Latin letters, so the scripts did not give it away; its characters do."""
    from pathlib import Path

    from swiftwriter.writing.guards import SCRIPT_SPAN, strange_share, turned_to_soup

    story = (
        "Claire did not look up from the sink. \u201cNot now,\u201d she said \u2014 twice. " * 40
    )
    own = set('Claire did not look up from the sink. "Not now," she said - twice.')
    soup = (
        story[:600]
        + "\u2030\u02dc\u00af\u203b\u2039 \uff16\uff17\uff19 \u30b9\u30eb ESRSSIS PFGH " * 90
    )
    assert strange_share(story, own) < 0.1  # curly quotes and dashes the writer typed plainly
    assert turned_to_soup(soup[-SCRIPT_SPAN:], {"LATIN"}, own)
    assert not turned_to_soup(story[-SCRIPT_SPAN:], {"LATIN"}, own)
    table = story[:300] + "| 2019 | 1,234 | 5.6% | +12 |\n" * 80  # figures are ASCII: no soup
    assert not turned_to_soup(table[-SCRIPT_SPAN:], {"LATIN"}, own)
    roots = [Path("resources/prompts/heldout"), Path("tests/data")]
    texts = [p.read_text(encoding="utf-8") for root in roots for p in sorted(root.glob("*.txt"))]
    assert len(texts) >= 10
    for i, text in enumerate(texts):  # each writer's text, continued by the others' prose
        others = "".join(t for j, t in enumerate(texts) if j != i)
        assert not turned_to_soup(others[-SCRIPT_SPAN:], {"LATIN"}, set(text)), text[:60]


def test_takes_written_together_are_the_takes_their_seeds_write_alone(project, tiny_llama):
    """run_several: the first take goes into the document, the others are stored beside it,
    and each is exactly the take `run` writes with its seed (a fixed seed, then the next)."""
    text = random_text(3, 60)
    doc = project.add_document("Chapter 1", text)
    tok = Latin1Tokenizer()
    sampled = SamplingSettings(greedy=False, temperature=0.8, min_p=0.05, penalty=1.1, seed=11)

    def session(seed):
        return DocumentSession(
            project, doc.id, model=tiny_llama, tokenizer=tok, model_id="tiny",
            sampling=replace(sampled, seed=seed), ending=TakeEnding.exact(30),
            prompt_text=text, flush_interval=0,
        )  # fmt: skip

    together = session(11).run_several(3)
    assert together.text == project.document(doc.id).text[len(text) :]
    assert [g.applied for g in together.others] == [False, False]
    alone = [session(seed).run().text for seed in (11, 12, 13)]
    assert [together.text, *(g.text for g in together.others)] == alone
    assert len(set(alone)) == 3

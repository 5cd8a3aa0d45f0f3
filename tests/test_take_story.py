"""A take with "Keep to the story" bans the marks only chatter writes and the letters of
scripts the writer's text does not use, worked out in the take's own thread (Take.run), and
plain decoding and speculation still write one text."""

from __future__ import annotations

from types import SimpleNamespace

from swiftwriter.engine.decoding.settings import DraftSettings, SamplingSettings
from swiftwriter.take import Take, TakeRequest

PIECES = [" w"] * 16
PIECES[3], PIECES[9], PIECES[13], PIECES[14] = ".", " and", " ##", " שלום"  # a heading, Hebrew


class Tokenizer:
    identity = "story-test"
    bos_token_id = 0
    eos_token_id = None

    def encode(self, text, add_special_tokens=False):
        return [0 if c == "w" else 3 for c in text if c in "w."]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(PIECES[i] for i in ids)


def _take(model, drafting: DraftSettings, keep_to_story: bool):
    loaded = SimpleNamespace(model=model, tokenizer=Tokenizer(),
                             entry=SimpleNamespace(id="story"), precision=lambda: "float32")  # fmt: skip
    request = TakeRequest(None, None, loaded, prompt_text="w w w. w w." * 4, target=120,
                          sampling=SamplingSettings(seed=5), drafting=drafting, history=False,
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

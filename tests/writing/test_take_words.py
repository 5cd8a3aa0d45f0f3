"""A length asked in words: the take ends once the words are written (at a sentence end),
whatever tokens a word takes in the take's own text, and plain decoding and speculation end
at the same token."""

from __future__ import annotations

from types import SimpleNamespace

from swiftwriter.engine.decoding.settings import DraftSettings, SamplingSettings
from swiftwriter.words import count_words
from swiftwriter.writing.endings import ends_sentence
from swiftwriter.writing.take import Take, TakeRequest

MARKS = {3: ".", 9: ",", 15: " -", 10: "!", 11: "\n\n", 12: "."}
PIECES = [MARKS.get(i, " w") for i in range(16)]  # the 16-token model's text: mostly words


class PieceTokenizer:
    """The 16-token model's ids as pieces of text (by default words and punctuation: a take of
    it is countable text); text is read left to right, the longest piece first, the first id
    among equal pieces, anything else dropped."""

    identity = "pieces-test"
    bos_token_id = 0
    eos_token_id = None

    def __init__(self, pieces: list[str] = PIECES):
        self.pieces = pieces
        self.order = sorted(range(len(pieces)), key=lambda i: -len(pieces[i]))

    def encode(self, text, add_special_tokens=False):
        ids, at = [], 0
        while at < len(text):
            found = next((i for i in self.order if text.startswith(self.pieces[i], at)), None)
            if found is not None:
                ids.append(found)
            at += len(self.pieces[found]) if found is not None else 1
        return ids

    def decode(self, ids, skip_special_tokens=True):
        return "".join(self.pieces[i] for i in ids)


def take(model, drafting: DraftSettings, snapshots: list) -> object:
    loaded = SimpleNamespace(model=model, tokenizer=PieceTokenizer(),
                             entry=SimpleNamespace(id="pieces"), precision=lambda: "float32")  # fmt: skip
    prompt = " w w w w w w w w w." * 4  # 1.0 token a word: this take spends more
    request = TakeRequest(None, None, loaded, prompt_text=prompt, target=60, unit="words",
                          sampling=SamplingSettings(seed=3), drafting=drafting,
                          history=None, measure_baseline=False)  # fmt: skip
    return Take(request, on_stats=snapshots.append).run()


def test_a_take_asked_in_words_writes_them_and_speculation_ends_where_plain_does(
    tiny_vocab_model, monkeypatch
):
    monkeypatch.setattr("swiftwriter.writing.take.STATS_INTERVAL_S", 0.0)  # a snapshot every step
    monkeypatch.setattr("swiftwriter.writing.take.ESTIMATE_WORDS", 20)  # a short take's own ratio
    seen: list = []
    plain = take(tiny_vocab_model, DraftSettings.plain(), [])
    fast = take(tiny_vocab_model, DraftSettings(), seen)
    assert fast.result.token_ids == plain.result.token_ids
    ids = fast.result.token_ids
    text = PieceTokenizer().decode(ids)
    assert fast.stats["stop_reason"] == "length"
    assert count_words(text) >= 60 and ends_sentence(text)
    estimate = fast.target  # tokens the prompt's ratio gave 60 words
    assert len(ids) > estimate * 1.2  # this take needed more: the estimate alone stops short
    for n in range(estimate, len(ids)):  # and no shorter length was a sentence end with them
        short = PieceTokenizer().decode(ids[:n])
        assert not (ends_sentence(short) and count_words(short) >= 60)
    live = [s for s in seen if s.phase == "generating"]
    assert live and all(s.words_target == 60 for s in live)
    late = live[-1]
    assert late.target > estimate  # the dock's length follows the take's own tokens a word
    assert late.words == count_words(PieceTokenizer().decode(ids[: late.tokens]))


def test_a_take_runs_with_the_heap_it_found_frozen_and_unfreezes_it(tiny_vocab_model):
    """A full collection walks every tracked object while all threads wait (heap.py): during a
    take it walks only the take's own; afterwards the earlier objects are collectable again."""
    import gc

    from swiftwriter.heap import frozen_heap

    frozen: list[int] = []
    assert gc.get_freeze_count() == 0
    with frozen_heap():
        assert gc.get_freeze_count() > 0  # a take inside another leaves the outer's frozen
        take(tiny_vocab_model, DraftSettings(), [])
        inner = gc.get_freeze_count()
    assert inner > 0 and gc.get_freeze_count() == 0

    class Watch(list):
        def append(self, snapshot):
            frozen.append(gc.get_freeze_count())

    take(tiny_vocab_model, DraftSettings(), Watch())
    *during, last = frozen  # the live snapshots, then the final one after the take
    assert during and min(during) > 1000 and last == 0 == gc.get_freeze_count()


def test_keep_writing_a_length_in_words_forbids_end_of_text_until_the_words_end_it():
    """No token count marks where the words will be written, so end-of-text stays forbidden
    to the take's bound (a length in tokens: to the tokens asked)."""
    from swiftwriter.writing.take import ending_of

    loaded = SimpleNamespace(model=None, tokenizer=PieceTokenizer())
    prompt = " w w w w w w w w w." * 4

    def ending(unit: str, keep: bool):
        return ending_of(TakeRequest(None, None, loaded, prompt_text=prompt, target=600,
                                     unit=unit, keep_writing=keep))  # fmt: skip

    words = ending("words", True)
    assert words.words == 600 and words.min_new_tokens == words.limit > words.target
    assert ending("tokens", True).min_new_tokens == 600
    assert ending("words", False).min_new_tokens == ending("tokens", False).min_new_tokens == 0

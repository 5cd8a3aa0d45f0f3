"""The context-limit policy: "stop" ends a run at a full context with a clear reason; "slide"
keeps sinks + pinned tokens + the recent text and goes on. Re-prefilled ("reprefill" mode),
it writes exactly what plain decoding writes on the same windows (checked against an
independent full-forward loop and a hand-made re-prefill); the default cache-edit mode is
tested in test_slide_shift.py."""

from __future__ import annotations

import pytest
import torch
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.logits import LogitsPipeline
from swiftwriter.engine.decoding.settings import ContextSettings
from swiftwriter.engine.decoding.window import ContextWindow
from swiftwriter.errors import UserError
from transformers import DynamicCache

from tests.conftest import build_tiny

CTX = 64


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def small_ctx():
    return build_tiny("llama", seed=5, max_positions=CTX)


def run(model, prompt, n, sampling, context, drafting=None, pinned=()):
    gen = Generator(model, sampling, drafting, context=context, calibrate=False)
    out = []
    events = list(gen.generate(prompt, n, pinned_ids=pinned))
    for e in events:
        out.extend(e.tokens)
    return out, gen.stats, events


def presence_of(text, window, vocab):
    presence = torch.zeros(vocab, dtype=torch.bool)
    presence[torch.tensor(text[-window:])] = True
    return presence


def reference(model, prompt, n, sampling, sink, keep, pinned=()):
    """Plain greedy decoding written from scratch: a full forward over the current window for
    every token (no cache), the penalty over the last `window` tokens of the text."""
    pipe = LogitsPipeline(sampling)
    vocab = model.config.vocab_size
    head = list(prompt[:sink]) + list(pinned)
    keep_tokens = int(CTX * keep)
    text = list(prompt)
    view = list(prompt)
    first, slides, windows = None, 0, []
    if len(view) >= CTX:
        view = head + text[-(keep_tokens - len(head)) :]
        first = 0
    out = []
    while len(out) < n:
        if len(view) >= CTX:
            view = head + text[-(keep_tokens - len(head)) :]
            slides += 1
            first = len(out) if first is None else first
            windows.append((len(out), list(view)))
        with torch.no_grad():
            logits = model(torch.tensor([view])).logits[0, -1].float()
        presence = presence_of(text, sampling.window, vocab)
        tok = pipe.choose(pipe.process(logits, presence), None)
        text.append(tok)
        view.append(tok)
        out.append(tok)
    return out, first, slides, windows


LOOPING = [5, 9, 12, 40, 41, 5, 9, 12, 40, 41, 5, 9, 12, 40, 41, 5, 9, 12, 40, 41]


@pytest.mark.parametrize("penalty,window", [(1.0, 1024), (1.2, 100)])
def test_slide_equals_plain_decoding_on_the_same_windows(small_ctx, penalty, window):
    sampling = SamplingSettings(penalty=penalty, window=window)
    context = ContextSettings("slide", sink=4, keep=0.75, slide_mode="reprefill")
    n = 150
    expected, first, slides, windows = reference(small_ctx, LOOPING, n, sampling, 4, 0.75)
    assert first == CTX - len(LOOPING) and slides >= 5  # the run crosses the context often

    spec, st, _ = run(
        small_ctx,
        LOOPING,
        n,
        sampling,
        context,
        DraftSettings(max_nodes=8, pace=False, adaptive=False),
    )
    plain, pst, _ = run(small_ctx, LOOPING, n, sampling, context, DraftSettings.plain())
    assert plain == expected
    assert spec == expected
    assert st.windowed_from == pst.windowed_from == first
    assert st.reprefills == pst.reprefills == slides
    assert st.stop_reason == "length" and len(spec) == n
    assert st.kv_tokens_max <= CTX and st.kv_tokens_cap == CTX
    d = st.as_dict()
    assert d["windowed_from"] == first and d["reprefills"] == slides
    if penalty == 1.0:
        assert st.accepted_drafts > 0  # drafts were verified across the slides

    # A hand-made re-prefill for the first token after the first slide: a stock cache filled
    # with the window, then the window's last token.
    at, view = windows[0]
    cache = DynamicCache(config=small_ctx.config)
    with torch.no_grad():
        small_ctx(torch.tensor([view[:-1]]), cache=cache, use_cache=True)
        logits = small_ctx(
            torch.tensor([view[-1:]]),
            position_ids=torch.tensor([[len(view) - 1]]),
            cache=cache,
            use_cache=True,
        ).logits[0, -1]
    text = LOOPING + expected[:at]
    pipe = LogitsPipeline(sampling)
    presence = presence_of(text, window, small_ctx.config.vocab_size)
    assert pipe.choose(pipe.process(logits.float(), presence), None) == spec[at]


def test_pinned_tokens_follow_the_sinks(small_ctx):
    sampling = SamplingSettings(penalty=1.2, window=48)
    context = ContextSettings("slide", sink=3, keep=0.75, slide_mode="reprefill")
    pinned = [100, 101, 102, 103, 104]
    prompt = list(range(10, 40))
    expected, first, _, windows = reference(small_ctx, prompt, 80, sampling, 3, 0.75, pinned)
    assert windows[0][1][:8] == prompt[:3] + pinned
    out, st, _ = run(small_ctx, prompt, 80, sampling, context, DraftSettings(), pinned)
    assert out == expected and st.windowed_from == first


def test_a_prompt_longer_than_the_context_is_windowed_with_slide(small_ctx):
    sampling = SamplingSettings(penalty=1.2, window=64)
    prompt = [(7 * i) % 200 + 2 for i in range(150)]
    expected, first, slides, _ = reference(small_ctx, prompt, 40, sampling, 16, 0.75)
    context = ContextSettings("slide", slide_mode="reprefill")
    out, st, _ = run(small_ctx, prompt, 40, sampling, context, DraftSettings())
    assert first == 0 and out == expected
    assert st.windowed_from == 0 and st.reprefills == slides


def test_stop_policy_stops_with_a_clear_reason(small_ctx):
    out, st, events = run(
        small_ctx, list(range(2, 60)), 100, SamplingSettings(penalty=1.0), ContextSettings()
    )
    assert events[-1].stop_reason == st.stop_reason == "context_full"
    assert len(out) == CTX - 58 and st.windowed_from is None and st.reprefills == 0
    with pytest.raises(UserError, match="sliding-window"):
        run(small_ctx, list(range(2, 80)), 10, SamplingSettings(), ContextSettings())


def test_window_rules():
    settings = ContextSettings("slide", sink=4, keep=0.5)
    prompt = [9] * 30
    notes_first = ContextWindow(
        100, settings, [1, 2, 3, 4, 5, 6] + prompt, pinned=[1, 2, 3, 4, 5, 6]
    )
    assert notes_first.slide_head == [1, 2, 3, 4, 5, 6]  # pinned tokens that open the prompt: once
    with pytest.raises(UserError, match="pin fewer"):
        ContextWindow(100, settings, prompt, pinned=list(range(60)))
    # a cache edit's span: the head's slots kept, then as many dropped as the view shrinks by
    window = ContextWindow(100, ContextSettings("slide", sink=4, keep=0.5), list(range(100)))
    text = list(range(100))
    assert window.shift_span(text) == (4, 50)
    assert window.slide(text) == text[:4] + text[54:]
    text += list(range(200, 250))
    assert window.length(text) == 100 and window.shift_span(text) == (4, 50)
    apart = ContextWindow(100, settings, prompt, pinned=[1, 2])  # the pinned are not cached yet
    assert apart.shift_span([9] * 100) is None
    for bad in (
        {"policy": "wrap"}, {"sink": -1}, {"keep": 1.0}, {"keep": 0.0},
        {"slide_mode": "rotate"},
    ):  # fmt: skip
        with pytest.raises(UserError):
            ContextSettings(**bad)

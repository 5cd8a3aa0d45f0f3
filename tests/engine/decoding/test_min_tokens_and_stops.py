"""End-of-text forbidden before `min_new_tokens`, and stop strings that cut a speculative step
where plain decoding would have stopped: speculation still writes plain decoding's text, and
`hf` with transformers' `min_new_tokens` agrees."""

from __future__ import annotations

import pytest
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings

from tests.engine.decoding.test_exactness import hf_greedy

GREEDY = SamplingSettings(greedy=True, penalty=1.2, window=64)
PLAIN = DraftSettings(max_nodes=0)
DRAFTS = DraftSettings(
    max_nodes=8, adaptive=False
)  # drafts verified every step, whatever the timings


def run(model, prompt, n, drafting=None, eos=(), sampling=GREEDY, **kwargs):
    gen = Generator(model, sampling, drafting, eos_ids=eos)
    out, reasons = [], []
    for ev in gen.generate(prompt, n, **kwargs):
        out.extend(ev.tokens)
        reasons.append(ev.stop_reason)
    return out, reasons[-1], gen.stats


def prompt_and_eos(model):
    """A repetitive prompt and, as end-of-text, the token greedy decoding writes third."""
    prompt = [5, 9, 12, 5, 9, 12, 5, 9, 12, 5, 9]
    first, _, _ = run(model, prompt, 6, PLAIN)
    return prompt, first[2]


@pytest.mark.parametrize("arch", ["tiny_llama", "tiny_qwen2"])
def test_end_of_text_waits_for_the_minimum_and_speculation_agrees(arch, request):
    model = request.getfixturevalue(arch)
    prompt, eos = prompt_and_eos(model)
    early, reason, _ = run(model, prompt, 80, PLAIN, eos=[eos])
    assert reason == "eos" and len(early) == 3
    plain, reason, _ = run(model, prompt, 80, PLAIN, eos=[eos], min_new_tokens=60)
    assert eos not in plain[:60] and len(plain) >= 60
    fast, fast_reason, stats = run(model, prompt, 80, DRAFTS, eos=[eos], min_new_tokens=60)
    assert fast == plain and fast_reason == reason
    assert stats.drafted_nodes > 0  # drafts were verified on the way
    hf = hf_greedy(model, prompt, 80, GREEDY, eos=eos)
    assert hf[:3] == early
    import torch
    from swiftwriter.engine.decoding.logits import PipelineLogitsProcessor
    from transformers import LogitsProcessorList

    ids = torch.tensor([prompt])
    out = model.generate(
        ids, attention_mask=torch.ones_like(ids), max_new_tokens=80, min_new_tokens=60,
        do_sample=False, eos_token_id=eos, pad_token_id=0, num_beams=1, top_k=None,
        top_p=None, temperature=None,
        logits_processor=LogitsProcessorList([PipelineLogitsProcessor(GREEDY)]),
    )  # fmt: skip
    assert out[0, len(prompt) :].tolist()[: len(plain)] == plain


@pytest.mark.parametrize("arch", ["tiny_llama", "tiny_qwen2"])
def test_a_stop_string_cuts_the_step_where_plain_decoding_stops(arch, request):
    model = request.getfixturevalue(arch)
    prompt = [5, 9, 12, 5, 9, 12, 5, 9, 12, 5, 9]
    loops = SamplingSettings(greedy=True, penalty=1.0)  # the text repeats: long drafts pass
    reference, _, _ = run(model, prompt, 120, PLAIN, sampling=loops)

    def stop(ids):  # "a stop sequence": any test on the text so far
        return len(ids) >= 77 and ids[-1] == reference[80]

    first = next(i for i in range(77, len(reference) + 1) if stop(reference[:i]))
    plain, reason, _ = run(model, prompt, 120, PLAIN, sampling=loops, stop_on_text=stop)
    fast, fast_reason, stats = run(model, prompt, 120, DRAFTS, sampling=loops, stop_on_text=stop)
    assert reason == fast_reason == "stop_string"
    assert plain == fast == reference[:first]
    assert stats.accepted_drafts > 10  # multi-token steps ran, and the last one was cut exactly

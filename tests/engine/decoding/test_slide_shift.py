"""The sliding window moved by a cache edit ("shift", the default): plain decoding and
speculation slide at the same token with bit-identical caches, so they write the same text in
every dtype across several slides (Llama, Qwen3, Phi-3's partial rotary, Gemma 3's sliding
layers and table per layer type); a shifted slide runs no prefill; a model whose rotary cannot
be turned exactly re-prefills and says why; pinned tokens that do not open the prompt are read
once, at the first slide, and shifted from then on."""

from __future__ import annotations

import pytest
import torch
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.run import Run
from swiftwriter.engine.decoding.settings import ContextSettings

from tests.engine.families import build_family

pytestmark = pytest.mark.usefixtures("one_thread")

LOOPING = [5, 9, 12, 40, 41, 7, 5, 9, 12, 40, 41, 8] * 3
SPECULATE = DraftSettings(max_nodes=8, pace=False, adaptive=False)


class Recorded(Run):
    """A run that keeps a copy of its cache after every slide, and counts the decoder's own
    forward calls (prefills: the lean passes walk the layers without it)."""

    def start(self):
        decoder, self.decoder_calls = self.runner.decoder, 0
        forward = decoder.forward

        def counted(*args, **kwargs):
            self.decoder_calls += 1
            return forward(*args, **kwargs)

        decoder.forward = counted  # an instance attribute, dropped in `close`
        self.caches = []
        super().start()

    def slide_if_full(self):
        slides = self.stats.slides
        super().slide_if_full()
        if self.stats.slides > slides:
            layers = self.runner.cache.layers
            self.caches.append([(x.keys.clone(), x.values.clone()) for x in layers])

    def close(self):
        del self.runner.decoder.forward  # the class's own again
        super().close()


def generate(model, prompt, n, drafting, context, sampling=None, pinned=()):
    gen = Generator(
        model, sampling or SamplingSettings(penalty=1.05, window=32), drafting,
        context=context, calibrate=False,
    )  # fmt: skip
    runs = []

    class Kept(Recorded):
        def __init__(self, *args):
            super().__init__(*args)
            runs.append(self)

    gen.run_type = Kept
    out = [t for event in gen.generate(prompt, n, pinned_ids=pinned) for t in event.tokens]
    return out, gen.stats, runs[0]


def assert_same_caches(a, b):
    assert len(a) == len(b)
    for slide_a, slide_b in zip(a, b, strict=True):
        for (ka, va), (kb, vb) in zip(slide_a, slide_b, strict=True):
            assert torch.equal(ka, kb) and torch.equal(va, vb)


@pytest.mark.parametrize("name", ["llama", "qwen3", "phi3", "gemma3"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_speculation_writes_plain_decodings_text_across_shifted_slides(name, dtype):
    model = build_family(name, seed=3, max_positions=64).to(dtype)
    context = ContextSettings("slide", sink=4, keep=0.6)
    plain, pst, prun = generate(model, LOOPING, 160, DraftSettings.plain(), context)
    spec, st, srun = generate(model, LOOPING, 160, SPECULATE, context)
    assert spec == plain
    assert st.shifts == pst.shifts == st.slides >= 4 and st.reprefills == pst.reprefills == 0
    assert st.windowed_from == pst.windowed_from == 64 - len(LOOPING)
    assert st.accepted_drafts > 0  # drafts were verified across the slides
    assert st.kv_tokens_max <= 64 == st.kv_tokens_cap
    assert_same_caches(prun.caches, srun.caches)  # bit for bit, slide after slide
    # a slide costs no prefill: the decoder ran for the prompt only
    assert prun.decoder_calls == srun.decoder_calls == 1


def test_sampled_text_is_the_same_too():
    model = build_family("qwen3", seed=4, max_positions=64).to(torch.bfloat16)
    context = ContextSettings("slide", sink=4, keep=0.6)
    sampling = SamplingSettings(greedy=False, penalty=1.1, window=32, min_p=0.1, seed=5)
    plain, pst, _ = generate(model, LOOPING, 160, DraftSettings.plain(), context, sampling)
    spec, st, _ = generate(model, LOOPING, 160, SPECULATE, context, sampling)
    assert spec == plain and st.shifts == pst.shifts >= 4


def test_reprefill_stays_available_and_reads_the_window_at_each_slide():
    model = build_family("llama", seed=3, max_positions=64)
    context = ContextSettings("slide", sink=4, keep=0.6, slide_mode="reprefill")
    plain, pst, prun = generate(model, LOOPING, 160, DraftSettings.plain(), context)
    spec, st, srun = generate(model, LOOPING, 160, SPECULATE, context)
    assert spec == plain and st.reprefills == st.slides >= 4 and st.shifts == 0
    assert prun.decoder_calls == srun.decoder_calls == 1 + st.reprefills
    assert st.slide_fallback == ""  # asked for, not a fallback


def test_a_rotary_that_cannot_be_turned_reprefills_and_says_why():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            bos_token_id=0, eos_token_id=1,
            rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0},
        )
    ).eval()  # fmt: skip
    context = ContextSettings("slide", sink=4, keep=0.6)
    plain, pst, _ = generate(model, LOOPING, 100, DraftSettings.plain(), context)
    spec, st, _ = generate(model, LOOPING, 100, SPECULATE, context)
    assert spec == plain and st.reprefills == st.slides >= 2 and st.shifts == 0
    assert "dynamic" in st.slide_fallback and st.as_dict()["slide_fallback"] == st.slide_fallback


def test_pinned_tokens_apart_from_the_prompt_are_read_once_then_shifted():
    model = build_family("llama", seed=3, max_positions=64)
    context = ContextSettings("slide", sink=3, keep=0.6)
    pinned = [100, 101, 102, 103, 104]
    plain, pst, prun = generate(model, LOOPING, 160, DraftSettings.plain(), context, pinned=pinned)
    spec, st, srun = generate(model, LOOPING, 160, SPECULATE, context, pinned=pinned)
    assert spec == plain and st.reprefills == 1 and st.shifts == st.slides - 1 >= 3
    assert prun.decoder_calls == srun.decoder_calls == 2  # the prompt, the first window
    assert_same_caches(prun.caches, srun.caches)

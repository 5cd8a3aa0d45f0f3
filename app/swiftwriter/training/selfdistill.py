"""The base model writes its own training text (self-distillation), in resumable shards.

Drafters must predict what *this* model writes under the product's penalty, so the best
training text is the model's own: a sampled start from a varied opener (so texts diverge),
then the body written in each of the app's modes in turn (settings.MODES: penalised greedy for
Precise, Creative's sampling), or TokenSwift's sampler ("tokenswift"). Batched generation keeps the CPU busy; each finished batch is one
safetensors shard of token ids, written atomically, so a stopped run resumes where it was."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from swiftwriter import atomic
from swiftwriter.engine.decoding.logits import PipelineLogitsProcessor
from swiftwriter.engine.decoding.settings import MODES, SamplingSettings
from swiftwriter.errors import UserError
from swiftwriter.training.openers import OPENERS

SAMPLED_START = 24
# TokenSwift's sampler: the varied start of every text, and a body mode of its own
TOKENSWIFT = SamplingSettings(greedy=False, min_p=0.1, penalty=1.2, window=1024)
DEFAULT_MODES = ("precise", "creative")


def body_sampler(mode: str) -> SamplingSettings:
    """The sampling a shard's body is written with: an app mode by name, or "tokenswift"."""
    if mode == "tokenswift":
        return TOKENSWIFT
    if mode not in MODES:
        raise UserError(f"Unknown writing mode '{mode}' (known: {', '.join(MODES)}, tokenswift)")
    return MODES[mode]


def shard_paths(folder: Path) -> list[Path]:
    return sorted(Path(folder).glob("text-*.safetensors"))


def load_text_shards(folder: Path) -> list[torch.Tensor]:
    """Token rows [B, L] of every finished shard."""
    return [load_file(str(p))["tokens"].long() for p in shard_paths(folder)]


class _Stopped(Exception):
    pass


def _generate(
    model, ids, mask, n, sampling: SamplingSettings, seed: int, should_stop=None, on_step=None
):
    class Cancel(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            if should_stop is not None and should_stop():
                raise _Stopped  # a half-written batch is dropped, never saved
            if on_step is not None:
                on_step()  # one more token per row: progress within a batch
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

    config = copy.deepcopy(model.generation_config)
    config.eos_token_id = -1  # write exactly n tokens: EOS is ordinary text here
    config.pad_token_id = 0
    config.do_sample = not sampling.greedy
    config.temperature, config.top_k, config.top_p, config.min_p = 1.0, None, None, None
    config.repetition_penalty = None
    torch.manual_seed(seed)
    with torch.inference_mode():
        out = model.generate(
            ids,
            attention_mask=mask,
            generation_config=config,
            max_new_tokens=n,
            logits_processor=LogitsProcessorList([PipelineLogitsProcessor(sampling)]),
            stopping_criteria=StoppingCriteriaList([Cancel()]),
        )
    return out


class _Ticks:
    """Progress within a batch (each generated token adds one per row), so the time a stage
    takes can be estimated from its first tokens rather than its first whole batch."""

    def __init__(self, on_progress, written: int, rows: int, total: int):
        self.on_progress, self.written, self.rows, self.total = on_progress, written, rows, total
        self.steps = 0

    def __call__(self) -> None:
        self.steps += 1
        if self.on_progress:
            done = min(self.written + self.steps * self.rows, self.total - 1)
            self.on_progress(done, self.total)


def write_text(
    model,
    tokenizer,
    out_dir: Path,
    total_tokens: int,
    batch: int = 16,
    length: int = 768,
    on_progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    modes: Sequence[str] = DEFAULT_MODES,
) -> list[Path]:
    """Write shards until `total_tokens` generated tokens exist in `out_dir`; shard i's body
    is written in modes[i % len(modes)] (`body_sampler`)."""
    samplers = [body_sampler(m) for m in modes]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    device = model.get_input_embeddings().weight.device
    existing = shard_paths(out_dir)
    done = len(existing)
    written = sum(load_file(str(p))["tokens"].numel() for p in existing)
    while written < total_tokens:
        if should_stop and should_stop():
            break
        index = done
        texts = [OPENERS[(index * batch + i) % len(OPENERS)] for i in range(batch)]
        enc = _left_padded(tokenizer, texts, device)
        step = _Ticks(on_progress, written, len(texts), total_tokens)
        body = samplers[index % len(samplers)]
        try:
            out = _write_rows(model, enc, body, length, index, should_stop, step)
        except _Stopped:
            break
        rows = out[:, enc.input_ids.shape[1] :].to(torch.int32).cpu().contiguous()
        # Keep each row's opener too (without padding) as context; store generated part only.
        path = out_dir / f"text-{index:05d}.safetensors"
        meta = {"mode": modes[index % len(modes)]}
        atomic.replace_with(path, functools.partial(save_file, {"tokens": rows}, metadata=meta))
        done += 1
        written += rows.numel()
        if on_progress:
            on_progress(min(written, total_tokens), total_tokens)
    return shard_paths(out_dir)


def _left_padded(tokenizer, texts: list[str], device):
    """The openers tokenized as one left-padded batch; the tokenizer (maybe the app's own) is
    left as it was."""
    side, pad = tokenizer.padding_side, tokenizer.pad_token
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    try:
        return tokenizer(texts, return_tensors="pt", padding=True).to(device)
    finally:
        tokenizer.padding_side, tokenizer.pad_token = side, pad


def _write_rows(model, enc, body, length: int, index: int, should_stop, step):
    """A batch of rows `length` tokens past their openers: the first SAMPLED_START tokens with
    TokenSwift's sampler, the rest with the shard's `body` sampler."""
    ids = _generate(model, enc.input_ids, enc.attention_mask, SAMPLED_START, TOKENSWIFT,
                    index, should_stop, step)  # fmt: skip
    mask = torch.cat([enc.attention_mask, torch.ones_like(ids[:, enc.input_ids.shape[1] :])], dim=1)
    rest = length - SAMPLED_START
    return _generate(model, ids, mask, rest, body, index + 1_000_003, should_stop, step)

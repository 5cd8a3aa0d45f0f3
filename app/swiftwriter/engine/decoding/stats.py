"""Per-step and per-run statistics: what the stats panel and the benchmark show."""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field, fields


@dataclass
class StepStats:
    new_tokens: int
    trie_nodes: int  # draft nodes verified, root excluded
    accepted: int  # draft tokens accepted (the bonus token excluded)
    accepted_by_source: dict[str, int]
    accepted_by_depth: list[int]
    draft_s: float
    verify_s: float  # the model pass and the acceptance walk (logits on demand)
    overhead_s: float
    model_s: float = 0.0  # the model's pass and its lm_head calls in the walk (in verify_s)


SURPRISE_PIECE = 512


@dataclass
class RunStats:
    prompt_tokens: int = 0
    tokens: int = 0
    forward_passes: int = 0
    drafted_nodes: int = 0
    accepted_drafts: int = 0
    accepted_by_source: Counter = field(default_factory=Counter)
    accepted_by_depth: Counter = field(default_factory=Counter)
    # "source:depth" -> accepted nodes: a learned drafter's acceptance per draft position
    accepted_by_source_depth: Counter = field(default_factory=Counter)
    prefill_s: float = 0.0
    draft_s: float = 0.0
    verify_s: float = 0.0
    overhead_s: float = 0.0
    # the model's passes (forward and the walk's lm_head calls, re-prefills too): inside
    # decode_s; the rest of decode_s is the host's (drafting, the trie, the walk's choices,
    # compaction, bookkeeping)
    model_s: float = 0.0
    stop_reason: str = ""
    # Long runs: where the context first slid (index into the generated tokens; None = never),
    # how often it slid, by a cache edit (shifts) or by rebuilding the cache on the window
    # (reprefills: the slide mode asked, or a shift could not be exact: `slide_fallback` says
    # why), and the memory bounds (KV tokens held at once, entries per candidate source)
    # against their caps.
    windowed_from: int | None = None
    # what the window left behind: [start, end) in prompt + output, the ids between the kept
    # head (sinks and pinned tokens) and the window's text (None: it never slid)
    slid_out: list | None = None
    slides: int = 0
    shifts: int = 0
    shift_s: float = 0.0  # inside overhead_s: already part of `seconds`
    reprefills: int = 0
    reprefill_s: float = 0.0  # inside overhead_s: already part of `seconds`
    slide_fallback: str = ""
    kv_tokens_max: int = 0
    kv_tokens_cap: int | None = None
    source_sizes: dict = field(default_factory=dict)  # name -> {"entries": n, "cap": c}
    quality: dict = field(default_factory=dict)  # quality.summary of the output, set at the end
    gated_skips: int = 0  # steps on which a costly source (the drafter) was not asked
    plain_steps: int = 0  # steps that did not draft: plain decoding was measured faster
    # Passes with no draft node (the drafts priced out, or a plain step): their time without
    # drafting is plain decoding's, measured in the same minutes and contexts as the run
    # (baseline.plain_rate reads it).
    undrafted_passes: int = 0
    undrafted_tokens: int = 0
    undrafted_s: float = 0.0
    # The model's dtype, and whether every pass was batch-invariant (each row computed as the
    # one-token pass computes it): then speculation wrote plain decoding's text exactly.
    dtype: str = ""
    invariant: bool = False
    # How drafts were judged: "greedy", or the sampler (settings.SAMPLERS): "same-text" keeps
    # plain decoding's text for the seed, "fastest" its distribution only
    sampler: str = ""
    # The compute threads the last pass ran on, and why (engine/decoding/threads.py)
    threads: int = 0
    threads_why: str = ""
    # How surprised the plain model is by the text it writes: the mean of -log p(token) under
    # its raw distribution (no penalty, temperature 1), per piece of SURPRISE_PIECE tokens.
    # Prose reads at about 1.5-2.5 nats a token with the default model, a loop near 0, a take
    # that has broken down into word salad or letter soup at 4 and more (the writing layer
    # stops it: writing/guards.py).
    surprise_by_piece: list = field(default_factory=list)
    _nats: list = field(default_factory=lambda: [0.0, 0])  # the open piece: sum, tokens

    def snapshot(self) -> RunStats:
        """A copy the engine's later steps leave alone: its counters, lists and dicts copied
        too. The engine goes on adding to this object in its thread while the Speed dock reads
        the copy in the GUI's (writing/take.py's LiveStats carries one)."""
        copied = copy.copy(self)
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (dict, list)):
                setattr(copied, f.name, copy.deepcopy(value))
        return copied

    def add_surprise(self, nats: list[float]) -> None:
        """The new tokens' -log p, in order; closes a piece every SURPRISE_PIECE tokens."""
        for value in nats:
            self._nats[0] += value
            self._nats[1] += 1
            if self._nats[1] == SURPRISE_PIECE:
                self.surprise_by_piece.append(round(self._nats[0] / SURPRISE_PIECE, 3))
                self._nats = [0.0, 0]

    def add(self, step: StepStats) -> None:
        self.tokens += step.new_tokens
        self.forward_passes += 1
        self.drafted_nodes += step.trie_nodes
        self.accepted_drafts += step.accepted
        self.accepted_by_source.update(step.accepted_by_source)
        for depth, count in enumerate(step.accepted_by_depth, start=1):
            self.accepted_by_depth[depth] += count
        self.draft_s += step.draft_s
        self.verify_s += step.verify_s
        self.overhead_s += step.overhead_s
        self.model_s += step.model_s
        if step.trie_nodes == 0:
            self.undrafted_passes += 1
            self.undrafted_tokens += step.new_tokens
            self.undrafted_s += step.verify_s + step.overhead_s

    @property
    def decode_s(self) -> float:
        return self.draft_s + self.verify_s + self.overhead_s

    @property
    def seconds(self) -> float:
        return self.prefill_s + self.decode_s

    @property
    def tau(self) -> float:
        """Tokens per forward pass of the target model."""
        return self.tokens / self.forward_passes if self.forward_passes else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_drafts / self.drafted_nodes if self.drafted_nodes else 0.0

    @property
    def model_ms_per_step(self) -> float:
        return 1000 * self.model_s / max(1, self.forward_passes)

    @property
    def host_ms_per_step(self) -> float:
        """Decoding time per step outside the model's passes: drafting, the trie, the walk's
        choices, compaction and bookkeeping."""
        return 1000 * (self.decode_s - self.model_s) / max(1, self.forward_passes)

    @property
    def ngram_entries(self) -> int:
        return self.source_sizes.get("ngram", {}).get("entries", 0)

    def as_dict(self) -> dict:
        return {
            "prompt_tokens": self.prompt_tokens,
            "tokens": self.tokens,
            "forward_passes": self.forward_passes,
            "tau": round(self.tau, 4),
            "drafted_nodes": self.drafted_nodes,
            "accepted_drafts": self.accepted_drafts,
            "acceptance_rate": round(self.acceptance_rate, 4),
            "accepted_by_source": dict(self.accepted_by_source),
            "accepted_by_depth": {str(k): v for k, v in sorted(self.accepted_by_depth.items())},
            "accepted_by_source_depth": dict(sorted(self.accepted_by_source_depth.items())),
            "surprise_by_piece": list(self.surprise_by_piece),
            "prefill_s": round(self.prefill_s, 4),
            "draft_s": round(self.draft_s, 4),
            "verify_s": round(self.verify_s, 4),
            "overhead_s": round(self.overhead_s, 4),
            "gated_skips": self.gated_skips,
            "plain_steps": self.plain_steps,
            "undrafted_passes": self.undrafted_passes,
            "undrafted_tokens": self.undrafted_tokens,
            "undrafted_s": round(self.undrafted_s, 4),
            "model_s": round(self.model_s, 4),
            # per step: the model's passes (forward and lm_head), and everything else the host
            # does; on a GPU told apart only with synchronised timing (Generator.sync_timing)
            "model_ms_per_step": round(self.model_ms_per_step, 3),
            "host_ms_per_step": round(self.host_ms_per_step, 3),
            "seconds": round(self.seconds, 4),
            "tokens_per_s": round(self.tokens_per_s, 3),
            "stop_reason": self.stop_reason,
            "windowed_from": self.windowed_from,
            "slid_out": self.slid_out,
            "slides": self.slides,
            "shifts": self.shifts,
            "shift_s": round(self.shift_s, 4),
            "reprefills": self.reprefills,
            "reprefill_s": round(self.reprefill_s, 4),
            "slide_fallback": self.slide_fallback,
            "kv_tokens_max": self.kv_tokens_max,
            "kv_tokens_cap": self.kv_tokens_cap,
            "ngram_entries": self.ngram_entries,
            "source_sizes": {k: dict(v) for k, v in self.source_sizes.items()},
            "quality": self.quality,
            "dtype": self.dtype,
            "invariant": self.invariant,
            "sampler": self.sampler,
            "threads": self.threads,
            "threads_why": self.threads_why,
        }

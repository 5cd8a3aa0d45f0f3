"""The settings objects of one generation: how to pick tokens, and how to draft them."""

from __future__ import annotations

from dataclasses import dataclass

from swiftwriter.errors import UserError

# Below this a draw is greedy decoding in all but name, and far below it the scaled logits
# overflow (1e-320 is 0 in float32: a take wrote nothing); Precise is the greedy mode.
MIN_TEMPERATURE = 0.01
# How speculation judges sampled drafts (DraftSettings.sampler): the same text per seed as
# plain decoding, or the most accepted drafts for the same distribution.
SAMPLERS = ("same-text", "fastest")
# The app's and `generate`'s sampler: the one measured faster on the held-out suite in
# Creative on this project's reference machine (README, "Speed, measured").
DEFAULT_SAMPLER = "same-text"


@dataclass(frozen=True)
class SamplingSettings:
    """The logits pipeline, identical for plain decoding and for every verified trie node.

    Order: contextual penalty (tokens seen in the last `window` tokens: logit/theta if positive,
    logit*theta if negative), DRY (see engine/decoding/dry.py; over the same `window`, off while
    `dry_multiplier` is 0), the banned tokens (never written: their logits -inf, for every row
    alike, so plain decoding and speculation still draw from one distribution), temperature,
    top-k, top-p, min-p. `greedy` takes the argmax."""

    greedy: bool = True
    penalty: float = 1.2
    window: int = 1024
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int | None = None
    dry_multiplier: float = 0.0
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    banned_tokens: tuple[int, ...] = ()  # e.g. chatter.banned_tokens: what only chatter writes

    def __post_init__(self):
        if not self.penalty > 0:
            raise UserError(f"The penalty must be positive, not {self.penalty}")
        if self.window < 1:
            raise UserError(f"The penalty window must be at least 1 token, not {self.window}")
        if not self.temperature >= MIN_TEMPERATURE:
            raise UserError(
                f"The temperature must be at least {MIN_TEMPERATURE} (for greedy decoding "
                f"choose Precise: --preset precise), not {self.temperature}"
            )
        if self.top_k < 0:
            raise UserError(f"top-k must be 0 (off) or positive, not {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise UserError(f"top-p must be in (0, 1], not {self.top_p}")
        if not 0 <= self.min_p < 1:
            raise UserError(f"min-p must be in [0, 1), not {self.min_p}")
        if not 0 <= self.dry_multiplier < float("inf"):
            raise UserError(
                f"The DRY multiplier must be 0 (off) or positive, not {self.dry_multiplier}"
            )
        if not 1 <= self.dry_base < float("inf"):
            raise UserError(f"The DRY base must be at least 1, not {self.dry_base}")
        if self.dry_allowed_length < 1:
            raise UserError(
                f"The DRY allowed length must be at least 1 token, not {self.dry_allowed_length}"
            )
        if any(not isinstance(t, int) or t < 0 for t in self.banned_tokens):
            raise UserError("Banned tokens are token ids: whole numbers from 0")


@dataclass(frozen=True)
class DraftSettings:
    """Which candidate sources draft, and how big a trie one verification pass may take."""

    # "heads" drafts with the model's learned drafter when one is loaded (ignored otherwise);
    # what each source adds is measured in the README ("Speed, measured").
    sources: tuple[str, ...] = ("heads", "ngram", "suffix")
    max_nodes: int = 32  # draft nodes per step, besides the root
    max_depth: int = 24
    ngram_branches: int = 20  # TokenSwift: top 20 continuations of the 4-gram table
    suffix_max_len: int = 24
    adaptive: bool = True  # choose the trie size by expected tokens per unit of cost
    # decode plainly while drafting measures slower than plain decoding (estimate.PaceKeeper;
    # with adaptive pricing only): off, every step drafts, as exactness tests need
    pace: bool = True
    head_tree: tuple[int, ...] = ()  # drafter children per node and depth; () = the kind's default
    head_beam: int = 4  # recurrent drafter: nodes expanded per depth
    # Recurrent drafter, EAGLE-2's dynamic tree: a node is expanded to the next depth only
    # while the drafter's probability of its whole path is at least this (0 = always, up to
    # the beam), so deeper levels (host time every drafting step pays) run where they may hold.
    head_grow: float = 0.0
    # Draft-vocabulary ids a drafter scores (its most frequent; 0 = all): 2,048 cover 90% of
    # the default model's tokens and cut the draft head's weight reads fourfold against 8,192.
    head_vocab: int = 2048
    # Sampling: drafters propose what their own distribution draws under the noise the target
    # will draw with (logits.Draws), not their most likely tokens. Off only to measure it.
    couple: bool = True
    # Sampling: how drafts are judged (SAMPLERS). "same-text": the shared-noise coupling above,
    # so a seed writes plain decoding's text; "fastest": recursive rejection sampling
    # (engine/decoding/rejection.py), drafts accepted at 1 - TV, the same distribution but
    # another text per seed. Greedy modes judge by the argmax either way.
    sampler: str = "same-text"

    def __post_init__(self):
        if self.sampler not in SAMPLERS:
            raise UserError(f"The sampler is one of {', '.join(SAMPLERS)}, not '{self.sampler}'")
        if self.max_nodes < 0 or self.max_depth < 1:
            raise UserError("max_nodes must be >= 0 and max_depth >= 1")
        if not 0.0 <= self.head_grow < 1.0:
            raise UserError("head_grow is a probability: at least 0, below 1")
        widest = max(self.max_nodes, 1)  # a step's trie holds no more nodes than that
        if len(self.head_tree) > self.max_depth or any(
            not 1 <= k <= widest for k in self.head_tree
        ):
            raise UserError(
                f"The drafter's tree takes 1 to {widest} candidates per depth (the nodes a "
                f"step drafts) over at most {self.max_depth} depths, not "
                f"{','.join(map(str, self.head_tree))}"
            )

    @classmethod
    def plain(cls) -> DraftSettings:
        """No drafting at all: one token per forward pass (the baseline)."""
        return cls(sources=(), max_nodes=0)


@dataclass(frozen=True)
class ContextSettings:
    """What happens when the model's context window fills.

    "stop" ends the run with stop_reason "context_full". "slide" keeps the first `sink` prompt
    tokens (attention sinks), the caller's pinned tokens and the most recent text, `keep` of the
    context in all (positions restart at 0), and goes on: the head-room (1 - keep) makes slides
    rare. `slide_mode` "shift" moves the window by editing the KV cache (the oldest entries
    after the head dropped, the kept keys turned to their new positions: no prefill), falling
    back to "reprefill" (the cache rebuilt on the window) where a model's rotary cannot be
    turned exactly. Plain decoding and speculation slide at the same token the same way, so
    they write the same tokens either way. `limit` narrows the window below the model's context
    (`generate --context-limit`: a short take slides as a long one would)."""

    policy: str = "stop"
    sink: int = 16
    keep: float = 0.75
    slide_mode: str = "shift"
    limit: int | None = None

    def __post_init__(self):
        if self.policy not in ("stop", "slide"):
            raise UserError(f"The context policy must be 'stop' or 'slide', not '{self.policy}'")
        if self.sink < 0:
            raise UserError(f"The sink must be 0 or more tokens, not {self.sink}")
        if not 0 < self.keep < 1:
            raise UserError(f"keep must be a fraction of the context in (0, 1), not {self.keep}")
        if self.slide_mode not in ("shift", "reprefill"):
            raise UserError(
                f"The slide mode must be 'shift' or 'reprefill', not '{self.slide_mode}'"
            )
        if self.limit is not None and (
            isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 8
        ):
            raise UserError(
                f"The context limit is a whole number of 8 tokens or more, not {self.limit!r}"
            )

    def window(self, model_context: int | None) -> int | None:
        """The tokens the model sees at once: its context, or `limit` where that is smaller."""
        if self.limit is None:
            return model_context
        return self.limit if model_context is None else min(model_context, self.limit)


# The app's modes and drafting strategies, one definition for the generation panel, `generate`
# and the bench (`swiftwriter bench --preset creative --strategy balanced` runs exactly the
# app's). Importing this module loads no torch (engine/__init__.py), so the command line names
# them in its help and checks its options before the model's libraries load.
MODES = {
    "precise": SamplingSettings(),  # greedy, penalty 1.2 over 1,024 tokens
    # Penalty 1.1 with DRY 0.8, not the token penalty 1.2 alone: over 2,048 sampled tokens on
    # four suite prompts (experiments/sampler_health.py) 1.2 turned two of them into word salad
    # (surprise 3.3-4.8 nats a token), 1.0 looped (0.04), 1.1 alone looped one ("BBBB..."), and
    # 1.1 with DRY kept every 512-token piece at 1.7-2.4 with Distinct-4 0.97-1.00.
    "creative": SamplingSettings(
        greedy=False, temperature=0.8, top_p=0.95, min_p=0.05, penalty=1.1, dry_multiplier=0.8
    ),
}
# The mode a take starts in, in the app and in `generate` (measured: greedy decoding loops
# over long takes, README)
DEFAULT_MODE = "creative"
STRATEGIES = {
    "conservative": DraftSettings(max_nodes=8, max_depth=8),
    "balanced": DraftSettings(),
    "fast": DraftSettings(max_nodes=64, max_depth=32),
}

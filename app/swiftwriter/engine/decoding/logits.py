"""One logits pipeline for plain decoding, tree verification and transformers' `generate`.

Every node of a draft trie is scored with exactly the penalty window that plain decoding would
have had at that position: the committed history plus the node's own ancestors (TokenSwift's
public code scores one row only and ignores the ancestors). DRY sees the same context."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from transformers import LogitsProcessor

from swiftwriter.engine.decoding import dry
from swiftwriter.engine.decoding.settings import SamplingSettings


class PenaltyWindow:
    """Counts of each token id over the last `window` committed tokens, kept incrementally."""

    def __init__(self, vocab_size: int, window: int, device: torch.device | str = "cpu"):
        self.window = window
        self.counts = torch.zeros(vocab_size, dtype=torch.int32, device=device)
        self.history: list[int] = []
        self._tail: tuple[int, np.ndarray] = (0, np.zeros(0, dtype=np.int64))

    def extend(self, tokens: Sequence[int]) -> None:
        if not tokens:
            return
        old_len = len(self.history)
        self.history.extend(tokens)
        new_len = len(self.history)
        added = self.history[max(old_len, new_len - self.window) :]
        # Tokens that were inside the old window and are outside the new one (new tokens that
        # arrived and left within this call were never counted).
        dropped = self.history[
            max(0, old_len - self.window) : min(old_len, max(0, new_len - self.window))
        ]
        dev = self.counts.device
        if added:
            self.counts.index_put_(
                (torch.tensor(added, device=dev),),
                torch.ones(len(added), dtype=torch.int32, device=dev),
                accumulate=True,
            )
        if dropped:
            self.counts.index_put_(
                (torch.tensor(dropped, device=dev),),
                torch.full((len(dropped),), -1, dtype=torch.int32, device=dev),
                accumulate=True,
            )

    def presence(self, path: Sequence[int] = ()) -> torch.Tensor:
        """Bool [V]: tokens inside the window of history + path (path = ancestors, then the node)."""
        n_path = len(path)
        if n_path == 0:
            return self.counts > 0
        h = min(len(self.history), self.window)
        keep_from_history = max(0, self.window - n_path)
        n_drop = max(0, h - keep_from_history)
        counts = self.counts.clone()
        dev = counts.device
        if n_drop:
            dropped = self.history[len(self.history) - h : len(self.history) - h + n_drop]
            counts.index_put_(
                (torch.tensor(dropped, device=dev),),
                torch.full((n_drop,), -1, dtype=torch.int32, device=dev),
                accumulate=True,
            )
        added = list(path[-self.window :])
        counts.index_put_(
            (torch.tensor(added, device=dev),),
            torch.ones(len(added), dtype=torch.int32, device=dev),
            accumulate=True,
        )
        return counts > 0

    def presences(self, paths: Sequence[Sequence[int]]) -> torch.Tensor:
        """Bool [len(paths), V]: `presence(path)` for every path at once (one batched update
        of the counts, no reads from the device)."""
        h = min(len(self.history), self.window)
        rows: list[int] = []
        ids: list[int] = []
        deltas: list[int] = []
        for i, path in enumerate(paths):
            if not path:
                continue
            n_drop = max(0, h - max(0, self.window - len(path)))
            dropped = self.history[len(self.history) - h : len(self.history) - h + n_drop]
            added = list(path[-self.window :])
            rows += [i] * (n_drop + len(added))
            ids += dropped + added
            deltas += [-1] * n_drop + [1] * len(added)
        counts = self.counts.expand(len(paths), -1).clone()
        if rows:
            dev = counts.device
            counts.index_put_(
                (torch.tensor(rows, device=dev), torch.tensor(ids, device=dev)),
                torch.tensor(deltas, dtype=torch.int32, device=dev),
                accumulate=True,
            )
        return counts > 0

    def presence_on_host(self) -> torch.Tensor:
        """`presence()` in host memory, built from the host's own history where the counts
        live on a device (a drafter on the CPU reads it without waiting for the device)."""
        if self.counts.device.type == "cpu":
            return self.counts > 0
        out = torch.zeros(self.counts.shape[0], dtype=torch.bool)
        recent = self.history[-self.window :]
        if recent:
            out[torch.tensor(recent)] = True
        return out

    def context(self, path: Sequence[int] = ()) -> np.ndarray:
        """The last `window` tokens of history + path, oldest first (what DRY scans)."""
        n_path = len(path)
        if n_path >= self.window:
            return np.asarray(path[-self.window :], dtype=np.int64)
        if self._tail[0] != len(self.history):  # once per step, shared by the trie's nodes
            self._tail = (len(self.history), np.asarray(self.history[-self.window :], np.int64))
        tail = self._tail[1]
        tail = tail[max(0, len(tail) - (self.window - n_path)) :]
        return np.concatenate((tail, np.asarray(path, dtype=np.int64))) if n_path else tail


def penalise(logits: torch.Tensor, presence: torch.Tensor | None, theta: float) -> torch.Tensor:
    """The repetition penalty (CTRL's): logits of tokens present in the window are divided by
    `theta` when positive and multiplied when negative; the one formula for the target's
    choices and the drafters' scores."""
    if presence is None or theta == 1.0:
        return logits
    punished = torch.where(logits > 0, logits / theta, logits * theta)
    return torch.where(presence, punished, logits)


def _penalise_present(logits: torch.Tensor, presence: torch.Tensor, theta: float) -> torch.Tensor:
    """`penalise` at the window's tokens only (a few hundred of the vocabulary), the same
    values; a copy, so the caller's logits stay as they were."""
    if presence.shape != logits.shape or logits.device.type != "cpu":  # (no device waits)
        return penalise(logits, presence, theta)
    out = logits.clone()
    seen = out[presence]
    out[presence] = torch.where(seen > 0, seen / theta, seen * theta)
    return out


class LogitsPipeline:
    """Penalty, DRY, temperature, top-k, top-p, min-p; then argmax or one seeded draw.

    Every walked node of a sampled run (and every plain step) goes through `process`, so its
    cost is paid per token by plain decoding and speculation alike: the penalty touches only
    the window's tokens, and top-p sorts only min-p's survivors (a few dozen ids, not the
    whole vocabulary: 3.9 -> 0.2 ms a row for a 49k vocabulary, measured under load)."""

    def __init__(self, settings: SamplingSettings):
        self.s = settings
        self._banned_ids: dict[torch.device, torch.Tensor] = {}

    def _banned(self, device: torch.device) -> torch.Tensor:
        """The banned ids as an index on `device` (made once per device)."""
        ids = self._banned_ids.get(device)
        if ids is None:
            ids = torch.tensor(sorted(set(self.s.banned_tokens)), dtype=torch.long, device=device)
            self._banned_ids[device] = ids
        return ids

    def process(
        self,
        logits: torch.Tensor,
        presence: torch.Tensor | None,
        context: Sequence[int] | np.ndarray | None = None,
    ) -> torch.Tensor:
        """logits [..., V] float32 -> processed logits (filtered entries are -inf).
        `context`: the last `window` tokens (PenaltyWindow.context), for DRY; one row only."""
        s = self.s
        x = logits.float()
        if presence is not None and s.penalty != 1.0:
            x = _penalise_present(x, presence, s.penalty)
        if context is not None and s.dry_multiplier > 0:
            ids, amounts = dry.penalties(
                np.asarray(context), s.dry_multiplier, s.dry_base, s.dry_allowed_length
            )
            if ids:  # out of place: `x` may still be the caller's tensor
                dev = x.device
                x = x.index_add(
                    -1,
                    torch.tensor(ids, device=dev),
                    -torch.tensor(amounts, dtype=x.dtype, device=dev),
                )
        if s.banned_tokens:  # out of place, as above
            x = x.index_fill(-1, self._banned(x.device), float("-inf"))
        if s.greedy:
            return x
        if s.temperature != 1.0:
            x = x / s.temperature
        if s.top_k > 0 and s.top_k < x.shape[-1]:
            kth = torch.topk(x, s.top_k, dim=-1).values[..., -1:]
            x = x.masked_fill(x < kth, float("-inf"))
        if s.min_p > 0.0 and x.device.type == "cpu":  # (a device would wait on nonzero)
            if x.dim() == 1:
                return self._nucleus(x)
            rows = x.reshape(-1, x.shape[-1])
            return torch.stack([self._nucleus(row) for row in rows]).reshape(x.shape)
        if s.top_p < 1.0:
            sorted_x, order = torch.sort(x, dim=-1, descending=False)
            cum = sorted_x.softmax(dim=-1).cumsum(dim=-1)
            drop_sorted = cum <= (1 - s.top_p)
            drop_sorted[..., -1:] = False  # always keep the most likely token
            drop = drop_sorted.scatter(-1, order, drop_sorted)
            x = x.masked_fill(drop, float("-inf"))
        if s.min_p > 0.0:
            probs = x.softmax(dim=-1)
            limit = probs.max(dim=-1, keepdim=True).values * s.min_p
            x = x.masked_fill(probs < limit, float("-inf"))
        return x

    def _nucleus(self, x: torch.Tensor) -> torch.Tensor:
        """Top-p, then min-p, on one row on the host. min-p keeps p >= min_p x max p, and
        renormalising after top-p changes neither side's ratio, so its survivors are found
        first, in logit space (x >= max x + log min_p). Top-p then needs only the survivors in
        order: below each one lies the whole mass of the tokens min-p dropped (all less
        likely) plus the survivors less likely than it. The kept set is top-p's on the whole
        vocabulary intersected with min-p's, as applying them in turn gives."""
        s = self.s
        keep = x >= x.max() + math.log(s.min_p)
        if s.top_p >= 1.0:
            return x.masked_fill(~keep, float("-inf"))
        survivors = torch.nonzero(keep).squeeze(-1)
        values, order = torch.sort(x[survivors])
        probs = (values - torch.logsumexp(x, dim=-1)).exp()
        cum = (1.0 - probs.sum()) + probs.cumsum(dim=-1)
        drop = cum <= (1 - s.top_p)
        drop[-1] = False  # always keep the most likely token
        survivors = survivors[order[~drop]]
        out = torch.full_like(x, float("-inf"))
        out[survivors] = x[survivors]
        return out

    def kept(self, row: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One row's ids that `process` (without penalty or DRY) leaves finite, ascending, and
        their processed values: what a drafter's draw reads, with the noise at those ids only."""
        out = self.process(row, None)
        ids = torch.nonzero(out > float("-inf")).squeeze(-1)
        return ids, out[ids]

    def choose(self, processed: torch.Tensor, noise: torch.Tensor | GumbelRow | None = None) -> int:
        """The next token from one row of processed logits: the argmax, or the Gumbel-max draw
        under `noise` (read back to the host: one read per call)."""
        return int(self.pick(processed, noise))

    def pick(
        self, processed: torch.Tensor, noise: torch.Tensor | GumbelRow | None = None
    ) -> torch.Tensor:
        """`choose` left on the device (a 0-d tensor), so a step can read many at once."""
        if self.s.greedy:
            return processed.argmax()
        return gumbel_max(processed, noise)


def gumbel_max(processed: torch.Tensor, noise: torch.Tensor | GumbelRow) -> torch.Tensor:
    """The token argmax(processed + noise): with standard Gumbel noise, a draw from
    softmax(processed) (the Gumbel-max trick). A filtered entry (-inf) is never drawn. The sum
    runs in float64 (float32 on Apple's MPS, which has none). On the host, one row is summed
    at its kept entries only (the same winner: ties go to the lowest id either way)."""
    wide = torch.float32 if processed.device.type == "mps" else torch.float64
    if processed.device.type == "cpu" and processed.dim() == 1:
        kept = torch.nonzero(processed > float("-inf")).squeeze(-1)
        if len(kept):
            best = (processed[kept].to(wide) + noise[kept].to(wide)).argmax()
            return kept[best]
    return (processed.to(wide) + noise.to(processed.device, wide)).argmax(-1)


_MASK = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15  # SplitMix64's step: the golden ratio's 64 bits
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB  # its finaliser's multipliers


def _mix(z: int) -> int:
    """SplitMix64's finaliser: every bit of the output depends on every bit of the input."""
    z = ((z ^ (z >> 30)) * _M1) & _MASK
    z = ((z ^ (z >> 27)) * _M2) & _MASK
    return z ^ (z >> 31)


def _mix_all(z: np.ndarray) -> np.ndarray:
    """`_mix` on an array of uint64 (numpy's unsigned products wrap modulo 2**64)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_M1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_M2)
    return z ^ (z >> np.uint64(31))


def _gumbel_at(key: int, ids: np.ndarray) -> np.ndarray:
    """Standard Gumbel noise (float64) for token `ids` of the position whose key is `key`: the
    id-th output of a SplitMix64 stream from that key, so each number depends on its own
    (position, id) alone and any subset of ids costs only its own size."""
    z = np.uint64(key) + (ids.astype(np.uint64) + np.uint64(1)) * np.uint64(_GAMMA)
    u = (_mix_all(z) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
    with np.errstate(divide="ignore"):
        return -np.log(-np.log(u))  # u = 0 gives -inf: that token cannot win


class GumbelRow:
    """The noise of one position, computed only where it is read: the target's draw needs it
    at the few dozen ids its filters keep, a drafter at its draft vocabulary, so the 49k
    numbers of a whole row (about 0.4 ms) are made only for a device's draw, which reads the
    row whole. Indexing gives float64, bit for bit the whole row's entries."""

    __slots__ = ("draws", "index", "size")

    def __init__(self, draws: Draws, index: int, size: int):
        self.draws, self.index, self.size = draws, index, size

    def __getitem__(self, ids) -> torch.Tensor:
        if isinstance(ids, torch.Tensor):
            ids = ids.cpu().numpy()
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.size):
            raise IndexError(f"token ids must lie in [0, {self.size})")
        return torch.from_numpy(_gumbel_at(self.draws.position_key(self.index), ids))

    def full(self) -> torch.Tensor:
        return self.draws.gumbel(self.index, self.size)

    def to(self, *args, **kwargs) -> torch.Tensor:
        """The whole row as a tensor (`Tensor.to`'s arguments), for a draw on a device."""
        return self.full().to(*args, **kwargs)


class Draws:
    """A run's random numbers, by position: the t-th new token is drawn with Gumbel noise, one
    number per (t, token id), generated from a hash of (seed, t, id). Plain decoding and
    speculation therefore draw every token with the same numbers however many trie nodes a
    step visits, and a drafter that sees the same numbers can propose the token the target
    will sample, not only its most likely one: argmax(log q + g) agrees with argmax(log p + g)
    with probability at least (1 - TV) / (1 + TV) (Daliri, Musco and Suresh 2024), and the
    drafter's top k under the same noise are a draw without replacement from q (list sampling).
    The output is still exactly distributed as the target's: the drafts never change g."""

    def __init__(self, seed: int, keep: int = 64):
        self.seed = seed
        self._key = _mix((seed & _MASK) ^ 0x5DEECE66D)
        self._kept: dict[tuple[int, int], torch.Tensor] = {}
        self._keep = keep

    def uniform(self, index: int) -> float:
        """One uniform in [0, 1) for position `index` (seeds the position's noise)."""
        return (self.position_key(index) >> 11) * (1.0 / (1 << 53))

    def position_key(self, index: int) -> int:
        return _mix((self._key + (index + 1) * _GAMMA) & _MASK)

    def row(self, index: int, size: int) -> GumbelRow:
        """The noise of the token at `index` over a vocabulary of `size`, made where read."""
        return GumbelRow(self, index, size)

    def gumbel(self, index: int, size: int) -> torch.Tensor:
        """Standard Gumbel noise [size] in float64 on the host for the token at `index`: the
        same numbers for the same (seed, index), whoever asks and in whatever order."""
        key = (index, size)
        noise = self._kept.get(key)
        if noise is None:
            ids = np.arange(size, dtype=np.int64)
            noise = torch.from_numpy(_gumbel_at(self.position_key(index), ids))
            if len(self._kept) >= self._keep:
                self._kept.pop(next(iter(self._kept)))
            self._kept[key] = noise
        return noise


class PipelineLogitsProcessor(LogitsProcessor):
    """The same pipeline as a transformers `LogitsProcessor`, so `generate` runs with equal settings."""

    def __init__(self, settings: SamplingSettings):
        self.pipeline = LogitsPipeline(settings)
        self.window = settings.window

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        recent = input_ids[:, -self.window :]
        presence = torch.zeros_like(scores, dtype=torch.bool)
        presence.scatter_(1, recent, True)
        if self.pipeline.s.dry_multiplier > 0:  # DRY reads each row's own context
            rows = [
                self.pipeline.process(scores[b], presence[b], recent[b].cpu().numpy())
                for b in range(scores.shape[0])
            ]
            return torch.stack(rows)
        return self.pipeline.process(scores, presence)

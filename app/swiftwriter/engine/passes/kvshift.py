"""Moving a full context window by editing the KV cache instead of re-reading the text
(StreamingLLM, KoboldCpp's ContextShift): a span of cached entries after the kept head (attention
sinks, pinned notes) is dropped and the later keys are turned back by the span's length, so
they sit at the positions the kept tokens now have. A slide then costs a copy of the cache, not
a prefill of thousands of tokens.

A rotary key at position a is R(θ(a)) k, one rotation per pair of dimensions (i, i + w/2), w the
rotary width (Phi-3's partial rotary turns the first w dimensions only); moving it to b is
R(θ(b) - θ(a)). The angles come from the model's own rotary embedding in float32, so yarn's or
longrope's attention scaling, longrope's short and long factors and Gemma 3's table per layer
type are the model's; the turn is computed in float64 and rounded to the cache's dtype once.
Values carry no position and move as they are. The kept entries keep what they attended to
when they were written: in the first layer the shifted cache is a fresh prefill of the kept
tokens at their new positions, deeper layers still carry the dropped text's influence (as
StreamingLLM's and ContextShift's do).

The same edit of the same cache gives the same bits, so plain decoding and speculation, which
slide at the same token with identical caches, stay identical. Where the turn could not be
exact the caller re-prefills instead, told why (`KeyShifter.refusal`)."""

from __future__ import annotations

import torch

from swiftwriter.engine.passes.leanpass import (
    _FAMILIES,
    _WINDOW_KINDS,
    _by_kind,
    _config,
    _rope_splits,
)


def refusal(model) -> str:
    """Why this model's cached keys cannot be moved to other positions exactly ("" when they
    can): only layers whose rotary this engine knows (leanpass's families: the rotate-half
    form on the keys as cached), with frequencies fixed per position."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    layers = getattr(decoder, "layers", None)
    if decoder is None or not layers:
        return "the model has no decoder layers this engine knows"
    names = {type(layer).__name__ for layer in layers}
    if len(names) != 1 or names.pop() not in _FAMILIES:
        return f"the rotary layout of {type(layers[0]).__name__} is not one this engine knows"
    rotary = getattr(decoder, "rotary_emb", None)
    if rotary is None:
        return "its positions are not rotary"
    if any(b.is_meta for b in rotary.buffers()):
        return "its rotary embedding is offloaded"
    if _rope_splits(model) is None:
        return "its rotary frequencies change with the text's length (dynamic scaling)"
    kinds = getattr(_config(model), "layer_types", None)
    if kinds and any(kind not in _WINDOW_KINDS for kind in kinds[: len(layers)]):
        return "it has layers of a kind this engine does not know"
    if _by_kind(rotary) and not kinds:
        return "its rotary has a table per layer type but the layers' types are unknown"
    return ""


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class KeyShifter:
    """Drops a span of a run's cache and turns the later keys to their new positions."""

    def __init__(self, model):
        self.reason = refusal(model)
        if self.reason:
            return
        decoder = model.get_decoder()
        self.rotary = decoder.rotary_emb
        count = len(decoder.layers)
        self.by_kind = _by_kind(self.rotary)
        kinds = getattr(_config(model), "layer_types", None) or [None] * count
        self.kinds = [kind if self.by_kind else None for kind in kinds[:count]]
        self.splits = _rope_splits(model)
        self.like = torch.empty(1, dtype=torch.float32, device=next(self.rotary.buffers()).device)

    def refusal(self, keep: int, drop: int, highest: int) -> str:
        """Why this shift would not be exact ("" when it is). `highest`: the largest position
        any call has written since the cache was filled. Longrope turns every position of a
        call with its long factors once the call reaches the switch: a key below it is known
        to carry its own position's factors only while no call has reached the switch, and a
        key above it always is."""
        if self.reason:
            return self.reason
        for cuts in self.splits.values():
            for cut in cuts:
                if highest >= cut and keep + drop < cut:
                    return (
                        f"longrope keys below position {cut} may carry either factors once a "
                        "pass reached it"
                    )
        return ""

    def _table(self, kind, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        """float64 cos, sin [stop - start, w] as a one-token pass at each position gets them
        (computed in pieces that do not straddle longrope's switch)."""
        cuts = [start, *(s for s in self.splits.get(kind, ()) if start < s < stop), stop]
        cos, sin = [], []
        for a, b in zip(cuts, cuts[1:], strict=False):
            pos = torch.arange(a, b, device=self.like.device)[None]
            c, s = (
                self.rotary(self.like, pos, kind) if self.by_kind else self.rotary(self.like, pos)
            )
            cos.append(c[0].double())
            sin.append(s[0].double())
        return torch.cat(cos), torch.cat(sin)

    def turns(self, kind, start: int, stop: int, drop: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin (float64 [n, w]) of the rotations that move keys at positions
        start..stop to start - drop..stop - drop: R(θ(b)) R(θ(a))^-1, the tables' attention
        scaling divided out."""
        cos_a, sin_a = self._table(kind, start, stop)
        cos_b, sin_b = self._table(kind, start - drop, stop - drop)
        scale = cos_a * cos_a + sin_a * sin_a  # the scaling squared (1 without one)
        cos = (cos_b * cos_a + sin_b * sin_a) / scale
        sin = (sin_b * cos_a - cos_b * sin_a) / scale
        return cos, sin

    @torch.inference_mode()
    def apply(self, cache, keep: int, drop: int, length: int) -> None:
        """Slots [keep, keep + drop) removed from every layer, slots [keep + drop, length)
        moved down by `drop`, their keys turned to their new positions."""
        if drop <= 0:
            return
        turns: dict = {}
        for kind, layer in zip(self.kinds, cache.layers, strict=False):
            if layer.get_seq_length() == 0:
                continue
            if kind not in turns:
                turns[kind] = self.turns(kind, keep + drop, length, drop)
            cos, sin = turns[kind]

            def turn(keys: torch.Tensor, cos=cos, sin=sin) -> torch.Tensor:
                width = cos.shape[-1]
                c, s = cos.to(keys.device), sin.to(keys.device)
                part = keys[..., :width].double()
                turned = (part * c + _rotate_half(part) * s).to(keys.dtype)
                if width == keys.shape[-1]:
                    return turned
                return torch.cat([turned, keys[..., width:]], dim=-1)

            layer.drop_span(keep, drop, length, turn)

"""Sampling through tree verification has exactly the distribution of plain sampling.

On a 16-token vocabulary the exact joint distribution of the first three tokens is computed
from the model itself (every prefix, through the same logits pipeline); 4,000 runs of the
speculative sampler, with drafts that are often right and often wrong, must fit it by a
chi-square test. The same test rejects TokenSwift's biased rule (sample each path independently,
keep the longest match) from 2,000 runs (p = 7e-6), so 4,000 leave it ample power."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.logits import Draws, LogitsPipeline, PenaltyWindow
from swiftwriter.engine.decoding.run import Run
from swiftwriter.engine.decoding.sources import Candidate, CandidateSource

PROMPT = [3, 7, 3, 7, 5]
SETTINGS = SamplingSettings(greedy=False, penalty=1.3, window=4, temperature=1.0, min_p=0.05)
N_SAMPLES = 4_000
N_FASTEST = 2_000  # as many as the biased rule needs to fail at p = 7e-6 (below)


class FixedDrafts(CandidateSource):
    """Proposes the two most likely continuations under plain sampling plus a poor one."""

    name = "fixed"

    def __init__(self, drafts):
        self.drafts = drafts

    def observe(self, tokens):
        pass

    def propose(self, context, max_candidates):
        return [Candidate(self.name, tuple(d), r) for r, d in enumerate(self.drafts)]


def exact_joint(model, vocab: int) -> dict[tuple, float]:
    pipeline = LogitsPipeline(SETTINGS)

    def step_probs(prefixes):
        ids = torch.tensor([PROMPT + list(p) for p in prefixes])
        with torch.no_grad():
            logits = model(ids).logits[:, -1].float()
        out = []
        for row, prefix in zip(logits, prefixes, strict=True):
            window = PenaltyWindow(vocab, SETTINGS.window)
            window.extend(PROMPT + list(prefix))
            out.append(pipeline.process(row, window.presence()).softmax(-1))
        return out

    p1 = step_probs([()])[0]
    firsts = list(itertools.product(range(vocab), repeat=1))
    p2 = dict(zip(firsts, step_probs(firsts), strict=True))
    seconds = list(itertools.product(range(vocab), repeat=2))
    p3 = dict(zip(seconds, step_probs(seconds), strict=True))
    joint = {}
    for a, b, c in itertools.product(range(vocab), repeat=3):
        joint[(a, b, c)] = float(p1[a] * p2[(a,)][b] * p3[(a, b)][c])
    return joint


def chi_square_p(observed: dict, expected_probs: dict, n: int) -> float:
    """Chi-square goodness of fit, cells with expected count < 5 pooled into one."""
    stat, dof, pool_obs, pool_exp = 0.0, -1, 0, 0.0
    for cell, p in expected_probs.items():
        e = p * n
        o = observed.get(cell, 0)
        if e < 5:
            pool_obs, pool_exp = pool_obs + o, pool_exp + e
            continue
        stat += (o - e) ** 2 / e
        dof += 1
    if pool_exp > 0:
        stat += (pool_obs - pool_exp) ** 2 / max(pool_exp, 1e-9)
        dof += 1
    # Wilson-Hilferty approximation of the chi-square upper tail.
    z = ((stat / dof) ** (1 / 3) - (1 - 2 / (9 * dof))) / math.sqrt(2 / (9 * dof))
    return 0.5 * math.erfc(z / math.sqrt(2))


class LongestMatchRun(Run):
    """TokenSwift's public rule, for contrast: the target is sampled independently along every
    leaf path and the longest agreeing path wins. Biased toward the drafts."""

    def _walk(self, trie, remaining):
        runner, window, pipeline = self.runner, self.window, self.gen.pipeline
        leaves = [i for i in range(len(trie)) if not trie.children[i]]
        best_path, best_new = None, None
        for k, leaf in enumerate(leaves):
            draws = Draws(self.draws.seed * 1009 + k)  # independent samples for every leaf
            chain = []
            node = leaf
            while node > 0:
                chain.append(node)
                node = trie.parents[node]
            chain.reverse()
            node, path, new = 0, [], []
            while True:
                logits = runner.logits_at(node, trie)
                token = pipeline.choose(
                    pipeline.process(logits, window.presence(trie.path_to(node))),
                    draws.gumbel(len(self.produced) + len(new), logits.shape[-1]),
                )
                new.append(token)
                nxt = chain[len(path)] if len(path) < len(chain) else None
                if nxt is None or trie.tokens[nxt] != token or len(new) >= remaining:
                    break
                path.append(nxt)
                node = nxt
            if best_path is None or len(path) > len(best_path):
                best_path, best_new = path, new
        return best_path, best_new


class LongestMatchOfIndependentSamples(Generator):
    run_type = LongestMatchRun


def sample_many(model, drafts, generator_cls=Generator, n=N_SAMPLES):
    counts: dict[tuple, int] = {}
    drafting = DraftSettings(sources=(), max_nodes=8, adaptive=False)
    gen = generator_cls(model, SETTINGS, drafting, sources=[FixedDrafts(drafts)], calibrate=False)
    accepted = 0
    for seed in range(n):
        out = []
        for ev in gen.generate(PROMPT, 3, seed=seed):
            out.extend(ev.tokens)
        accepted += gen.stats.accepted_drafts
        key = tuple(out[:3])
        counts[key] = counts.get(key, 0) + 1
    return counts, accepted


@pytest.fixture(scope="module")
def setup(tiny_vocab_model):
    joint = exact_joint(tiny_vocab_model, 16)
    ranked = sorted(joint, key=joint.get, reverse=True)
    drafts = [list(ranked[0]), list(ranked[1]), [15, 15, 15]]  # often right, often wrong
    return joint, drafts


@pytest.mark.slow
def test_speculative_sampling_matches_plain_distribution(tiny_vocab_model, setup):
    joint, drafts = setup
    counts, accepted = sample_many(tiny_vocab_model, drafts)
    assert accepted > N_SAMPLES * 0.2, "drafts were rarely accepted: the test would prove little"
    p = chi_square_p(counts, joint, N_SAMPLES)
    assert p > 0.01, f"speculative sampling does not match plain sampling (p={p:.2e})"


@pytest.mark.slow
def test_the_same_check_rejects_a_biased_sampler(tiny_vocab_model, setup):
    joint, drafts = setup
    counts, _ = sample_many(tiny_vocab_model, drafts, LongestMatchOfIndependentSamples, n=2000)
    assert chi_square_p(counts, joint, 2000) < 1e-4  # measured 7e-6 (4e-8 from 2,500)


class DrawingSource(CandidateSource):
    """A drafter for the "fastest" sampler: at the root it draws three tokens from `q` without
    replacement, under the first two of them two more, with the noise the run hands it, and
    keeps the draws by path, as the learned drafter does."""

    name = "drawing"

    def __init__(self, q: torch.Tensor):
        self.q, self.noise, self.records = q, None, {}

    def observe(self, tokens):
        pass

    def sample_drafts(self, noise):
        self.noise = noise

    def drawn(self):
        return self.records

    def _draw(self, path, level, row, k):
        from swiftwriter.engine.decoding.rejection import DraftRecord

        ids = torch.arange(len(self.q))
        top = (self.q.log() + self.noise(level, row, len(self.q))[ids]).topk(k)
        drawn = tuple(int(i) for i in top.indices)
        self.records[path] = DraftRecord(ids, self.q, drawn)
        return drawn

    def propose(self, context, max_candidates):
        self.records = {}
        out = []
        for slot, a in enumerate(self._draw((), 0, 0, 3)):
            out.append(Candidate(self.name, (a,), ranks=(slot,)))
            if slot < 2:
                for sub, b in enumerate(self._draw((a,), 1, slot, 2)):
                    out.append(Candidate(self.name, (a, b), ranks=(slot, sub)))
        return out


@pytest.mark.slow
def test_the_fastest_sampler_matches_plain_distribution(tiny_vocab_model, setup):
    """The rejection walk (rejection.py) with a drafter drawing several siblings at two depths
    and a source of fixed drafts (point masses) in one trie: the same joint distribution."""
    joint, drafts = setup
    first = torch.zeros(16, dtype=torch.float64)
    for (a, _b, _c), p in joint.items():
        first[a] += p
    q = 0.5 * first + 0.5 / 16  # near the target at depth 1, off it below
    drafting = DraftSettings(sources=(), max_nodes=8, adaptive=False, sampler="fastest")
    counts: dict[tuple, int] = {}
    accepted = 0
    drawing = DrawingSource(q)
    sources = [drawing, FixedDrafts(drafts)]
    gen = Generator(tiny_vocab_model, SETTINGS, drafting, sources=sources, calibrate=False)
    for seed in range(N_FASTEST):
        out = []
        for ev in gen.generate(PROMPT, 3, seed=seed):
            out.extend(ev.tokens)
        accepted += gen.stats.accepted_drafts
        counts[tuple(out[:3])] = counts.get(tuple(out[:3]), 0) + 1
    assert accepted > N_FASTEST * 0.5, "drafts were rarely accepted: the test would prove little"
    assert drawing.records, "the drafter never drew"
    p = chi_square_p(counts, joint, N_FASTEST)
    assert p > 0.01, f"the fastest sampler does not match plain sampling (p={p:.2e})"

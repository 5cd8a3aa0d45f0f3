"""The history index finds the longest match the way a brute-force scan does, updates only what
changed, survives a round trip through bytes; the history source defers to the context and
keeps generation exact."""

from __future__ import annotations

import json
import random
import time
from collections import Counter

from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.history_source import HistoryIndex, HistorySource


def brute_force(seqs, context, depth, min_match=2, per_match=2, cont_len=16):
    """Longest suffix of `context` (<= depth) followed by something in some sequence."""
    for m in range(min(depth, len(context)), min_match - 1, -1):
        pattern, found = context[-m:], Counter()
        for s in seqs:
            for end in range(m, len(s)):
                if s[end - m : end] == pattern:
                    found[tuple(s[end : end + min(cont_len, max(2, per_match * m))])] += 1
        if found:
            return m, found
    return 0, Counter()


def maximal(conts):
    return {c for c in conts if not any(o != c and o[: len(c)] == c for o in conts)}


def test_longest_match_and_continuations_agree_with_a_brute_force_scan():
    rng = random.Random(5)
    index = HistoryIndex(depth=8, cont_len=6, min_merge=40)  # tiny tiers: many merges
    seqs = {}
    for i in range(40):
        seqs[i] = [rng.randrange(8) for _ in range(rng.randint(0, 50))]
        index.update(f"s{i}", f"v{i}", seqs[i])
    for i in range(0, 40, 3):  # appends, rewrites and shrinking edits
        s = seqs[i] + [rng.randrange(8) for _ in range(rng.randint(0, 20))]
        if i % 2:
            s = s[: len(s) // 2] + [rng.randrange(8) for _ in range(3)]
        seqs[i] = s
        index.update(f"s{i}", f"w{i}", s)
    for i in range(1, 40, 7):
        index.discard(f"s{i}")
        del seqs[i]
    for i, s in seqs.items():
        assert index.tokens_of(f"s{i}") == s
    assert len(index) == sum(len(s) for s in seqs.values())
    checked = 0
    for _ in range(300):
        context = [rng.randrange(8) for _ in range(rng.randint(1, 12))]
        m, conts = index.continuations(
            context, max_nodes=10_000, min_prob=0.0, max_occurrences=10**6, length_per_match=2
        )
        want_m, want = brute_force(list(seqs.values()), context, depth=8, cont_len=6)
        assert m == want_m, context
        if want:
            checked += 1
            assert {c for c, _ in conts} == maximal(set(want))
            total = sum(want.values())
            best, p = conts[0]
            assert abs(p - sum(n for c, n in want.items() if c[: len(best)] == best) / total) < 1e-9
    assert checked > 100


def test_appending_to_a_sequence_indexes_only_the_new_tail():
    rng = random.Random(1)
    index = HistoryIndex()
    doc = [rng.randrange(50_000) for _ in range(5000)]
    index.update("d1", "a", doc)
    size = len(index.corpus)
    tail = [rng.randrange(50_000) for _ in range(40)]
    index.update("d1", "b", doc + tail)
    grown = len(index.corpus) - size
    assert grown <= len(tail) + index.cont_len + index.depth
    assert index.tokens_of("d1") == doc + tail and len(index) == len(doc) + len(tail)
    m, conts = index.continuations(doc[-20:] + tail[:3])  # a match across the junction
    assert m >= 16 and conts[0][0] == tuple(tail[3:19])
    index.update("d1", "b", [1, 2, 3])  # same fingerprint: nothing to do
    assert index.tokens_of("d1") == doc + tail


def test_parts_round_trip_and_only_changed_parts_are_written():
    rng = random.Random(2)
    index = HistoryIndex(min_merge=1000)
    for i in range(5):
        index.update(f"g{i}", "n", [rng.randrange(300) for _ in range(400)])
    parts = index.to_parts()
    assert set(parts) == {"meta", "corpus.static", "sa.static", "corpus.delta", "sa.delta"}
    copy = HistoryIndex.from_parts(parts)
    assert copy.fingerprints() == index.fingerprints() and len(copy) == len(index)
    context = index.tokens_of("g3")[:50]
    assert copy.continuations(context) == index.continuations(context)
    copy.update("g9", "n", [rng.randrange(300) for _ in range(50)])  # small: delta tier only
    assert set(copy.to_parts()) == {"meta", "corpus.delta", "sa.delta"}
    assert copy.to_parts() == {}
    broken = dict(parts, meta=parts["meta"].replace(b'"format": 1', b'"format": 99'))
    assert HistoryIndex.from_parts(broken) is None
    assert (
        HistoryIndex.from_parts({**parts, "sa.static": parts["sa.static"][:-8] + b"\xff" * 8})
        is None
    )
    assert HistoryIndex.from_parts({"meta": b"garbage"}) is None


def test_compaction_drops_dead_text_and_keeps_answers():
    rng = random.Random(3)
    index = HistoryIndex(depth=8, cont_len=8, min_merge=200)
    keep = [rng.randrange(20) for _ in range(300)]
    index.update("keep", "1", keep)
    for version in range(30):  # a document rewritten again and again
        index.update("churn", str(version), [rng.randrange(20) for _ in range(100)])
    assert len(index.corpus) < 3 * len(index) + 100  # dead text did not pile up
    last = index.tokens_of("churn")
    m, want = brute_force([keep, last], keep[100:110], depth=8, cont_len=8)
    got_m, got = index.continuations(keep[100:110], max_nodes=1000, min_prob=0.0)
    assert got_m == m and {c for c, _ in got} == maximal(set(want))


def test_source_speaks_only_where_history_knows_more_than_the_context():
    story = list(range(100, 140))
    source = HistorySource(sequences=[story])
    context = [7, 8, 9] + story[:10]
    source.observe(context)
    (first, *_rest) = source.propose(context, 20)
    assert first.source == "history" and first.tokens[:4] == tuple(story[10:14])
    assert first.rank == 0  # a 10-token match ranks first
    # the same phrase already repeated in the context: its own sources lead, history defers
    repeated = story[:10] + [1, 2] + story[:10]
    quiet = HistorySource(sequences=[story])
    quiet.observe(repeated)
    assert quiet.propose(repeated, 20) == [] and quiet.deferred == 1
    eager = HistorySource(sequences=[story], defer_to_context=False)
    eager.observe(repeated)
    assert eager.propose(repeated, 20)[0].tokens[:3] == tuple(story[10:13])
    # short matches rank lower, so the engine learns their acceptance separately
    short = HistorySource(sequences=[story])
    short.observe([5, 100, 101])
    assert short.propose([5, 100, 101], 20)[0].rank == 2
    assert HistorySource().propose([1, 2, 3], 20) == []


def test_seeded_generation_is_exact_and_uses_the_history(tiny_llama):
    """Greedy output is the same with and without history; with the earlier output seeded,
    history drafts get accepted and the same text takes fewer forward passes."""
    rng = random.Random(11)
    prompt = [rng.randrange(2, 256) for _ in range(48)]
    sampling = SamplingSettings(greedy=True, penalty=1.0)
    # history alone, to see it work; every step drafts (the pace keeper may decode plainly
    # while the estimator is still learning on a model this small and fast)
    drafting = DraftSettings(sources=(), pace=False, adaptive=False)

    def run(sources):
        gen = Generator(tiny_llama, sampling, drafting, sources=sources)
        out = []
        for event in gen.generate(prompt, 80):
            out.extend(event.tokens)
        return out, gen.stats

    plain, plain_stats = run([])
    seeded, stats = run([HistorySource(sequences=[prompt + plain])])
    assert seeded == plain
    assert stats.accepted_by_source["history"] > 20
    assert stats.forward_passes < plain_stats.forward_passes


def damaged(parts: dict, **changes) -> dict:
    meta = json.loads(parts["meta"])
    meta.update(changes)
    return {**parts, "meta": json.dumps(meta).encode()}


def test_a_damaged_cache_is_refused_before_it_allocates_anything():
    """Every number a stored cache holds is checked before anything is allocated by it: the
    issue's depth of 2**31 would have built a list of two billion separators first."""
    index = HistoryIndex()
    index.update("g1", "n", list(range(2, 200)))
    parts = index.to_parts()
    sound, why = HistoryIndex.restore(parts, vocab_size=256)
    assert why == "" and sound.fingerprints() == {"g1": "n"} and len(sound) == 198
    start = time.perf_counter()
    copy, why = HistoryIndex.restore(damaged(parts, depth=2147483648))
    assert copy is None and "depth 2147483648" in why and time.perf_counter() - start < 1
    for changes, said in [
        ({"alive_tokens": "NaN"}, "alive_tokens 'NaN'"),
        ({"alive_tokens": 5}, "alive_tokens 5 is not its sources' 198"),
        ({"static_end": True}, "static_end True"),
        ({"dead": [[0, 10**12]]}, "dead range"),
        ({"sources": {"g1": {"fp": "n", "pieces": [[16, 10**9]]}}}, "source"),
    ]:
        copy, why = HistoryIndex.restore(damaged(parts, **changes))
        assert copy is None and said in why, (changes, why)
    # token ids the model cannot read, and suffix arrays pointing outside the corpus
    assert "token id 100 is beyond the vocabulary of 100" in HistoryIndex.restore(parts, 100)[1]
    beyond = b"\xff\xff\x00\x00" * (len(parts["sa.delta"]) // 4)
    assert "sa.delta points outside" in HistoryIndex.restore({**parts, "sa.delta": beyond})[1]
    assert HistoryIndex.from_parts(damaged(parts, alive_tokens="NaN")) is None


def test_drafts_of_ids_beyond_the_vocabulary_are_never_verified(tiny_llama):
    """A history holding ids the model cannot read (a damaged project's takes) drafts them
    where the take goes; the engine leaves such drafts out, and the text is plain decoding's."""
    prompt = list(range(10, 40))
    sampling = SamplingSettings(greedy=True, penalty=1.0)
    drafting = DraftSettings(sources=(), pace=False, adaptive=False)

    def run(sources):
        out = []
        for event in Generator(tiny_llama, sampling, drafting, sources=sources).generate(
            prompt, 24
        ):
            out.extend(event.tokens)
        return out

    plain = run([])
    index = HistoryIndex()
    for k in range(0, len(plain), 2):  # wherever the take is, the history goes on out of range
        for bad in (60000, 4_000_000_000):
            index.add(prompt + plain[:k] + [bad] * 4)
    source = HistorySource(index)
    assert run([source]) == plain and source.proposed > 0

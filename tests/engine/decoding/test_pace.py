"""The pace keeper: a run is kept at least as fast as plain decoding by the clock."""

from __future__ import annotations

from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
from swiftwriter.engine.decoding.estimate import PaceKeeper

from tests.engine.wrong_source import WrongAndSlow


def drive(keeper: PaceKeeper, steps: int, draft_rate, plain_rate: float = 20.0) -> list[bool]:
    """Run `steps` steps at the given tokens per second (draft_rate: a callable of the step
    index, so the text can change); one token per plain step."""
    modes = []
    for i in range(steps):
        drafting = keeper.drafting()
        modes.append(drafting)
        rate = draft_rate(i) if drafting else plain_rate
        tokens = 2 if drafting else 1
        keeper.observe(tokens, tokens / rate)
    return modes


def test_drafting_that_pays_keeps_drafting_and_trials_shrink_to_a_percent():
    keeper = PaceKeeper()
    modes = drive(keeper, 2000, lambda i: 30.0)
    assert sum(modes) / len(modes) > 0.98
    assert keeper.plain_steps == len(modes) - sum(modes)
    assert not all(modes)  # plain decoding was measured, in short trials


def test_drafting_that_costs_time_gives_way_to_plain_decoding():
    keeper = PaceKeeper()
    modes = drive(keeper, 2000, lambda i: 18.0)  # drafting 10% slower than plain
    assert sum(modes) / len(modes) < 0.1
    assert any(modes[1000:])  # drafting is still tried now and then


def test_where_the_two_are_level_plain_decoding_wins():
    """Drafting 1% faster is within measurement noise: the run decodes plainly."""
    keeper = PaceKeeper(margin=1.02)
    modes = drive(keeper, 2000, lambda i: 20.2)
    assert sum(modes) / len(modes) < 0.1


def test_a_text_that_starts_repeating_wins_drafting_back():
    keeper = PaceKeeper()
    modes = drive(keeper, 3000, lambda i: 15.0 if i < 1000 else 40.0)
    assert sum(modes[:1000]) < 200
    late = modes[1000 + keeper.max_plain_hold + keeper.draft_trial :]
    assert sum(late) / len(late) > 0.95


def test_drafting_far_ahead_is_hardly_interrupted():
    """Where drafts are long, each plain trial step costs several tokens: more than twice as
    fast, drafting holds for the longest stretch at once."""
    keeper = PaceKeeper()
    modes = drive(keeper, 1200, lambda i: 60.0)
    assert len(modes) - sum(modes) == 2 * keeper.plain_trial


def test_a_long_drafting_stretch_ends_when_the_text_stops_repeating():
    """Drafting far ahead holds for the longest stretch; when its drafts stop holding the
    stretch is cut within a few dozen steps, not at its end."""
    keeper = PaceKeeper()
    modes = drive(keeper, 1500, lambda i: 60.0 if i < 300 else 15.0)
    assert all(modes[40:300])
    assert sum(modes[400:]) / len(modes[400:]) < 0.15


def test_the_first_drafting_steps_do_not_count():
    """One-off costs (kernels, allocations) land on the first drafting steps: a slow start
    must not send a run whose drafts pay to plain decoding."""
    keeper = PaceKeeper(warmup=2)
    modes = drive(keeper, 200, lambda i: 0.5 if i < 2 else 30.0)
    assert sum(modes) / len(modes) > 0.9


def test_the_generator_decodes_plainly_while_drafting_does_not_pay(tiny_llama):
    """Whatever the trie's pricing thinks, a source that costs 3 ms a step and is never right
    makes drafting slower than plain decoding: the run stops asking it, and the text is the
    same as plain decoding's."""
    sampling = SamplingSettings(greedy=True, penalty=1.2, window=64)
    prompt = list(range(10, 40))
    plain = Generator(tiny_llama, sampling, DraftSettings.plain(), calibrate=False)
    want = [t for ev in plain.generate(prompt, 300) for t in ev.tokens]
    source = WrongAndSlow(name="ngram", delay=0.003)
    gen = Generator(tiny_llama, sampling, DraftSettings(sources=(), max_nodes=1), sources=[source])
    got = [t for ev in gen.generate(prompt, 300) for t in ev.tokens]
    assert got == want
    assert gen.stats.plain_steps > 200
    assert source.calls + gen.stats.plain_steps == gen.stats.forward_passes
    assert gen.stats.as_dict()["plain_steps"] == gen.stats.plain_steps
    # every pass without a draft node is plain decoding's, timed without the drafting
    stats = gen.stats
    assert stats.plain_steps <= stats.undrafted_passes <= stats.forward_passes
    assert stats.undrafted_tokens == stats.undrafted_passes  # one token each
    assert 0 < stats.undrafted_s < stats.decode_s


def test_undrafted_passes_are_counted_without_their_drafting_time():
    from swiftwriter.engine.decoding.stats import RunStats, StepStats

    stats = RunStats()
    stats.add(StepStats(1, 0, 0, {}, [], draft_s=0.5, verify_s=0.02, overhead_s=0.01))
    stats.add(StepStats(3, 4, 2, {"ngram": 2}, [1, 1], 0.001, 0.03, 0.01))
    stats.add(StepStats(1, 0, 0, {}, [], draft_s=0.0, verify_s=0.02, overhead_s=0.01))
    assert (stats.undrafted_passes, stats.undrafted_tokens) == (2, 2)
    assert abs(stats.undrafted_s - 0.06) < 1e-12
    assert stats.as_dict()["undrafted_passes"] == 2


def test_without_adaptive_pricing_every_step_drafts(tiny_llama):
    """adaptive=False (fixed tries, for experiments) leaves the pace alone too."""
    sampling = SamplingSettings(greedy=True, penalty=1.2, window=64)
    source = WrongAndSlow(name="ngram", delay=0.003)
    drafting = DraftSettings(sources=(), max_nodes=1, adaptive=False)
    gen = Generator(tiny_llama, sampling, drafting, sources=[source], calibrate=False)
    list(gen.generate(list(range(10, 40)), 60))
    assert gen.stats.plain_steps == 0 and source.calls == gen.stats.forward_passes


def test_plain_steps_leave_the_sources_alone_until_the_next_draft(tiny_llama, monkeypatch):
    """A plain step costs what plain decoding's step costs: the sources read its tokens only
    when the run drafts again (that step pays for it), nothing is lost or reordered, and the
    text is plain decoding's."""
    from swiftwriter.engine.decoding import run as run_module

    class EveryFifth(PaceKeeper):
        def drafting(self) -> bool:
            self.plain_steps += 1
            self.mode = self.plain_steps % 5 == 0
            return self.mode

    class Watching(WrongAndSlow):
        def __init__(self):
            super().__init__(name="ngram", delay=0.0)
            self.seen: list[int] = []
            self.observes = 0

        def observe(self, tokens):
            self.observes += 1
            self.seen.extend(tokens)

    monkeypatch.setattr(run_module, "PaceKeeper", EveryFifth)
    sampling = SamplingSettings(greedy=True, penalty=1.2, window=64)
    prompt = list(range(10, 40))
    plain = Generator(tiny_llama, sampling, DraftSettings.plain(), calibrate=False)
    want = [t for ev in plain.generate(prompt, 80) for t in ev.tokens]
    source = Watching()
    drafting = DraftSettings(sources=(), max_nodes=1)
    gen = Generator(tiny_llama, sampling, drafting, sources=[source], calibrate=False)
    got = [t for ev in gen.generate(prompt, 80) for t in ev.tokens]
    assert got == want
    assert 0 < source.calls <= gen.stats.forward_passes // 4  # one step in five drafted
    # the prompt, then at most twice per drafting step (its catch-up, its own tokens)
    assert source.observes <= 1 + 2 * source.calls < gen.stats.forward_passes
    full = prompt + got
    assert source.seen == full[: len(source.seen)]
    assert len(full) - len(source.seen) <= 5  # the plain steps after the last draft

"""Side-by-side speed benchmark: every method on the same model object, prompt, settings and
dtype, in one process, timed the same way (wall clock around the whole call, prefill included).

Methods: `hf` (transformers `generate` with our logits pipeline as a processor), `hf-lookup`
(the same with prompt lookup decoding), `ar` (our plain decoding) and `tokenswift` (ours).

Like is compared with like: every row carries its output's hash (`output_sha256`) and whether
it is identical to `ar` (the app's reference: our plain decoding in the same dtype) and to
`hf`; a speed ratio between two methods is only given where their texts are identical
(`speedup_vs_ar`, `speedup_vs_hf`; null otherwise, with both speeds in the rows). Greedy
tokenswift must equal `ar` in every dtype, and `hf` in float32; in bfloat16 and float16 `hf`
rounds differently (`first_divergence` says where it leaves `ar`, with the top-2 gap there).
`ar-legacy` and `tokenswift-legacy` run the earlier, non-invariant passes (the fastest kernels
for each pass size) to show what invariance costs. Sampled runs cannot be compared token by
token with transformers (another random stream), so each row carries the output's quality
(Distinct-n, repetition rate) and `run_seeds` compares those between methods over seeds."""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from transformers import LogitsProcessorList

from swiftwriter.bench import curves, marathon, stattest
from swiftwriter.bench.draftpass import DraftPassGenerator
from swiftwriter.engine.decoding import quality
from swiftwriter.engine.decoding.generator import Generator, context_length
from swiftwriter.engine.decoding.logits import LogitsPipeline, PipelineLogitsProcessor
from swiftwriter.engine.decoding.settings import ContextSettings, DraftSettings, SamplingSettings
from swiftwriter.engine.passes import execution_device
from swiftwriter.training import accuracy

METHODS = (
    "hf",
    "hf-lookup",
    "ar",
    "tokenswift-noheads",
    "tokenswift",
    "tokenswift-fastest",
    "tokenswift-fullcache",
    "tokenswift+history",
    "ar-legacy",
    "tokenswift-legacy",
)


# another engine, timed beside ours on the same GGUF file (bench/llamacpp.py): only where the
# file loads in it, so not among the methods every bench can run
OTHER_ENGINES = ("llamacpp",)


@dataclass
class MethodResult:
    method: str
    tokens: list[int]
    seconds: float
    forward_passes: int | None = None
    accepted_by_source: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    times: list = field(default_factory=list)  # (tokens so far, seconds) per step

    @property
    def tokens_per_s(self) -> float:
        return len(self.tokens) / self.seconds if self.seconds else 0.0

    @property
    def tau(self) -> float | None:
        return len(self.tokens) / self.forward_passes if self.forward_passes else None


def _hf_generate(model, prompt, n, sampling: SamplingSettings, lookup: int = 0) -> MethodResult:
    config = copy.deepcopy(model.generation_config)
    # Every method writes exactly n tokens and treats EOS as an ordinary token (no stop, no
    # suppression: `min_new_tokens` would forbid EOS and change the output).
    config.eos_token_id = -1  # an id no model emits: None would be refilled from the model
    config.pad_token_id = 0
    config.do_sample = not sampling.greedy
    config.temperature, config.top_k, config.top_p, config.min_p = 1.0, None, None, None
    config.repetition_penalty = None
    ids = torch.tensor([prompt], device=execution_device(model.get_input_embeddings()))
    kwargs = {"prompt_lookup_num_tokens": lookup} if lookup else {}
    if not sampling.greedy and sampling.seed is not None:
        torch.manual_seed(sampling.seed)
    clock = curves.TokenClock()
    t = time.perf_counter()
    clock.start()
    with torch.inference_mode():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            generation_config=config,
            max_new_tokens=n,
            logits_processor=LogitsProcessorList([PipelineLogitsProcessor(sampling)]),
            streamer=clock,
            **kwargs,
        )
    seconds = time.perf_counter() - t
    return MethodResult(
        "hf-lookup" if lookup else "hf",
        out[0, len(prompt) :].tolist(),
        seconds,
        forward_passes=None if lookup else n,
        times=clock.times,
    )


def _llamacpp(llama, prompt, n, sampling: SamplingSettings) -> MethodResult:
    """llama.cpp's plain decoding on the same file (bench/llamacpp.py)."""
    if llama is None:
        raise ValueError("llamacpp needs the model's GGUF file loaded in llama.cpp")
    tokens, seconds, times = llama.generate(list(prompt), n, sampling)
    return MethodResult("llamacpp", tokens, seconds, n, extra={"note": llama.note()}, times=times)


def _ours(
    model,
    prompt,
    n,
    sampling,
    drafting,
    name,
    sources=(),
    drafter=None,
    context=None,
    invariant=True,
    partial_budget=None,
    context_limit=None,
) -> MethodResult:
    """`partial_budget`: run the draft-pass experiment (bench/draftpass.py) with that many KV
    tokens per head, instead of fused drafting. `context_limit`: the window our methods see,
    when smaller than the model's context (so a short run slides as a long one would)."""
    kwargs = dict(sources=list(sources), drafter=drafter, context=context, invariant=invariant)
    if partial_budget is None:
        gen = Generator(model, sampling, drafting, **kwargs)
    else:
        gen = DraftPassGenerator(model, sampling, drafting, partial_budget=partial_budget, **kwargs)
    if context_limit is not None:
        gen.max_context = min(gen.max_context or context_limit, context_limit)
    return Run(gen, name, prompt, n)


class Run:
    """One of our methods writing its text in turns (`advance`), its clock running only
    during its own turns: methods that take turns over the same stretch of time see the same
    machine (on a shared CPU the speed drifts by several percent within minutes)."""

    def __init__(self, gen, name: str, prompt, n: int):
        self.gen, self.name = gen, name
        self.events = gen.generate(prompt, n)
        self.out: list[int] = []
        self.seconds = 0.0
        self.times: list = []
        self.memory = curves.MemoryTrace()
        self.slides: list[tuple[int, int, float]] = []  # (tokens so far, slides, seconds)
        self._slid = (0, 0.0)
        self.done = False

    def advance(self, until: float = float("inf")) -> None:
        """Write until the text holds `until` tokens or the run ends."""
        start = time.perf_counter()
        while not self.done and len(self.out) < until:
            try:
                event = next(self.events)
            except StopIteration:
                self.done = True
                break
            self.out.extend(event.tokens)
            self.times.append((len(self.out), self.seconds + time.perf_counter() - start))
            self.memory.note(len(self.out))
            slid = marathon.slide_totals(event.run)
            if slid[0] != self._slid[0]:  # the window moved during this step
                self.slides.append(
                    (len(self.out), slid[0] - self._slid[0], slid[1] - self._slid[1])
                )
                self._slid = slid
        self.seconds += time.perf_counter() - start

    def result(self) -> MethodResult:
        st = self.gen.stats
        return MethodResult(
            self.name,
            self.out,
            self.seconds,
            st.forward_passes,
            dict(st.accepted_by_source),
            extra={"stats": st.as_dict(), "rss_mb": self.memory.points},
            times=self.times,
        )


def _finish(run):
    """A method's whole result: a `Run` written to its end, or transformers' finished one."""
    if isinstance(run, Run):
        run.advance()
        return run.result()
    return run


def run_method(method: str, *args, **kwargs) -> MethodResult:
    """The method's whole run (`start_method` takes the same arguments and says what they mean)."""
    return _finish(start_method(method, *args, **kwargs))


def start_method(
    method: str,
    model,
    prompt,
    n,
    sampling,
    drafting: DraftSettings | None = None,
    extra_sources=None,
    drafter=None,
    context: ContextSettings | None = None,
    partial_budget: int | None = None,
    context_limit: int | None = None,
    llama=None,
):
    """One of our methods as a `Run` not yet started (transformers' methods, which cannot
    pause, run whole and return their `MethodResult`).

    `extra_sources`: a callable returning fresh candidate sources (for `tokenswift+history`);
    `drafter`: a learned drafter bundle for `tokenswift` (and `+history`); `context`: the
    context-limit policy of our methods (`hf` cannot slide a window: it stops at the limit);
    `partial_budget`: tokenswift's drafter fed by the draft-pass experiment on a partial cache
    of that size (None: fused drafting, as in the app); `context_limit`: a window smaller
    than the model's context, for our methods; `llama`: the file loaded in llama.cpp, for
    `llamacpp` (bench/llamacpp.py)."""
    if method == "llamacpp":
        return _llamacpp(llama, prompt, n, sampling)
    if context is not None and context.policy == "slide" and method.startswith("hf"):
        raise ValueError(f"{method} has no sliding context window")
    name = method  # "-legacy": the same method on the earlier, non-invariant passes
    method = method.removesuffix("-legacy")
    if name != method and method not in ("ar", "tokenswift"):
        raise ValueError(f"unknown method {name}")
    if method == "hf":
        return _hf_generate(model, prompt, n, sampling)
    if method == "hf-lookup":
        return _hf_generate(model, prompt, n, sampling, lookup=10)
    ours = functools.partial(
        _ours,
        model,
        prompt,
        n,
        sampling,
        context=context,
        invariant=name == method,
        context_limit=context_limit,
    )
    return _start_ours(method, name, ours, model, drafting, extra_sources, drafter, partial_budget)


def _start_ours(method, name, ours, model, drafting, extra_sources, drafter, partial_budget):
    """One of our methods (`ours` runs it with the drafting settings and name given): plain
    decoding, or tokenswift with the drafters and draft pass the method names."""
    if method == "ar":
        return ours(DraftSettings.plain(), name)
    base = drafting or DraftSettings()
    if method in ("tokenswift", "tokenswift-fastest"):  # with its drafter, when one is given
        if method == "tokenswift-fastest":  # the "fastest" sampler (engine/decoding/rejection.py)
            base = dataclasses.replace(base, sampler="fastest")
        if drafter is not None and "heads" not in base.sources:
            base = dataclasses.replace(base, sources=("heads", *base.sources))
        return ours(base, name, drafter=drafter, partial_budget=partial_budget)
    if method == "tokenswift-fullcache":  # the draft pass attends to the whole context
        # (without a drafter there is no draft pass, as for tokenswift: the CLI says so)
        full = context_length(model.config) or 1 << 20
        base = dataclasses.replace(base, sources=tuple(dict.fromkeys(("heads", *base.sources))))
        budget = max(full, partial_budget or 0)
        return ours(base, method, drafter=drafter, partial_budget=budget)
    if method == "tokenswift-noheads":
        plain_sources = tuple(s for s in base.sources if s != "heads")
        return ours(dataclasses.replace(base, sources=plain_sources), method)
    if method == "tokenswift+history":
        if extra_sources is None:
            raise ValueError("tokenswift+history needs a history (--history PROJECT)")
        return ours(base, method, extra_sources(), drafter=drafter)
    raise ValueError(f"unknown method {method}")


def first_divergence(
    model, prompt, reference: Sequence[int], other: Sequence[int], sampling: SamplingSettings
) -> dict | None:
    """Where `other` leaves `reference`, with the target's top-2 logit gap there: a gap within
    numerical noise between exactly the two tokens the texts chose is a near-tie, not a logic
    error (a divergence to any other token never is)."""
    idx = next((i for i, (a, b) in enumerate(zip(reference, other, strict=False)) if a != b), None)
    if idx is None:
        return (
            None
            if len(reference) == len(other)
            else {"index": min(len(reference), len(other)), "gap": None, "near_tie": False}
        )
    ids = torch.tensor(
        [list(prompt) + list(reference[:idx])],
        device=execution_device(model.get_input_embeddings()),
    )
    with torch.inference_mode():
        logits = model(ids, logits_to_keep=1).logits[0, -1].float()
    presence = torch.zeros_like(logits, dtype=torch.bool)
    presence[ids[0, -sampling.window :]] = True
    context = ids[0, -sampling.window :].tolist()  # for DRY
    processed = LogitsPipeline(sampling).process(logits, presence, context)
    top2 = processed.topk(2)
    gap = float(top2.values[0] - top2.values[1])
    pair = {int(i) for i in top2.indices}
    dtype = next(model.parameters()).dtype
    if dtype == torch.float32:
        near = gap < 1e-4
    else:  # within the dtype's rounding step at this logit's magnitude (a few ulps)
        near = gap <= 4 * float(torch.finfo(dtype).eps) * max(1.0, abs(float(top2.values[0])))
    near = near and {int(reference[idx]), int(other[idx])} == pair
    return {"index": idx, "gap": gap, "near_tie": near, "top2": sorted(pair)}


def run_bench(
    model,
    prompt: list[int],
    n: int,
    sampling: SamplingSettings,
    methods: Sequence[str] = METHODS,
    repeat: int = 1,
    drafting: DraftSettings | None = None,
    warmup: bool = True,
    extra_sources=None,
    drafter=None,
    checkpoints: Sequence[int] | None = None,
    context: ContextSettings | None = None,
    baseline=None,
    partial_budget: int | None = None,
    turns: int = 0,
    segments: marathon.Segments | None = None,
    context_limit: int | None = None,
    llama=None,
) -> dict:
    """Run each method `repeat` times (interleaved); keep the fastest run of each. `turns`:
    our methods take turns of that many tokens each (`Run`), instead of one after another.
    `segments` (the marathon, bench/marathon.py): our methods take turns of a segment each
    (unless `turns` says otherwise), each segment reported as it ends and its rows kept in
    the row's `segments`, with their `marathon` summary (of the last repeat).
    Each row carries its speed `curve` at `checkpoints` (default: 1K, 2K, 4K, ... below n) and a thin
    `timeline` for plotting. `baseline` = (label, model): transformers' `generate` on the same
    model in another dtype, as row `hf@label` (what a transformers user would run; not a
    lossless comparison: another dtype writes another text)."""
    if warmup:  # first-call costs (allocator, kernels) should not land on whichever runs first
        _warm_up(model, prompt, n, sampling, methods, drafting, drafter)
    start = (model, prompt, n, sampling, drafting, extra_sources)
    how = dict(drafter=drafter, context=context, partial_budget=partial_budget,
               context_limit=context_limit, llama=llama)  # fmt: skip
    best: dict[str, MethodResult] = {}
    for _ in range(repeat):
        if baseline is not None:
            res = _baseline_run(baseline, prompt, n, sampling)
            _keep_fastest(best, {res.method: res})
        runs = _start_runs(methods, start, how, whole=not turns and segments is None)
        _take_all_turns(runs, turns, segments)
        _keep_fastest(best, {method: _finish(run) for method, run in runs.items()})
    report = _report(model, prompt, n, sampling, best, checkpoints)
    if segments is not None:
        _add_marathon(report, segments, model, prompt)
    if drafter is not None and "ar" in best and context_fits(model, prompt, best["ar"].tokens):
        _add_drafter_accuracy(report, model, drafter, prompt, best["ar"], sampling, drafting)
    return report


def _warm_up(model, prompt, n, sampling, methods, drafting, drafter) -> None:
    """A short run of ar (and tokenswift, whose pass costs are calibrated once per model)."""
    run_method("ar", model, prompt, min(8, n), sampling)
    if "tokenswift" in methods:  # and the once-per-model pass-cost calibration (run.py)
        run_method("tokenswift", model, prompt, min(8, n), sampling, drafting, drafter=drafter)


def _baseline_run(baseline, prompt, n, sampling) -> MethodResult:
    """Transformers' generate on the model in the baseline's dtype, as row hf@label."""
    label, other = baseline
    res = _hf_generate(other, prompt, n, sampling)
    res.method = f"hf@{label}"
    return res


def _start_runs(methods, start: tuple, how: dict, whole: bool) -> dict:
    """Each method started on the same arguments; `whole`: each run to its end in turn."""
    runs = {}
    for method in methods:
        runs[method] = start_method(method, *start, **how)
        if whole:
            runs[method] = _finish(runs[method])
    return runs


def _keep_fastest(best: dict[str, MethodResult], results: dict[str, MethodResult]) -> None:
    """Each method's fastest run so far in `best`."""
    for method, res in results.items():
        if method not in best or res.seconds < best[method].seconds:
            best[method] = res


def _take_all_turns(runs: dict, turns: int, segments: marathon.Segments | None) -> None:
    """Our methods' runs in turns (of a marathon segment each, unless `turns` says otherwise)."""
    ours = [r for r in runs.values() if isinstance(r, Run)]
    if segments is not None:
        segments.rows.clear()
        segments.outputs.clear()
    take_turns(ours, turns or (segments.size if segments else 0), after=segments)


def _add_marathon(report: dict, segments: marathon.Segments, model, prompt) -> None:
    """Each method's segments and their summary, in its row."""

    def score(before, tokens):
        return marathon.surprise(model, prompt, before, tokens)

    for method, rows in segments.finish(score).items():
        report[method]["segments"] = rows
        report[method]["marathon"] = marathon.summary(rows, report[method].get("stats"))


def _add_drafter_accuracy(report, model, drafter, prompt, ar: MethodResult, sampling, drafting):
    """How often the drafter guessed ar's text, in ar's row."""
    report["ar"]["drafter_accuracy"] = accuracy.on_text(
        model,
        drafter,
        list(prompt) + ar.tokens,
        len(prompt),
        sampling.penalty,
        sampling.window,
        vocab_limit=(drafting or DraftSettings()).head_vocab,
    )


def take_turns(runs: list[Run], turns: int, after=None) -> None:
    """Advance the runs `turns` tokens at a time, the first to go alternating between rounds,
    until every run has ended; `after(run)` is called after each turn."""
    if turns <= 0:
        return
    target, flip = 0, False
    while any(not r.done for r in runs):
        target += turns
        for run in reversed(runs) if flip else runs:
            run.advance(target)
            if after is not None:
                after(run)
        flip = not flip


def context_fits(model, prompt, tokens) -> bool:
    """Whether prompt and output fit the model's context in one pass (a slid run does not)."""
    limit = getattr(model.config, "max_position_embeddings", None)
    return limit is None or len(prompt) + len(tokens) <= int(limit)


def output_hash(tokens: Sequence[int]) -> str:
    """sha256 of the output ids (little-endian int32s): equal hashes, equal texts."""
    return hashlib.sha256(
        b"".join(int(t).to_bytes(4, "little", signed=True) for t in tokens)
    ).hexdigest()


def _ratio(reference: MethodResult | None, res: MethodResult, comparable: bool) -> float | None:
    """How many times faster `res` wrote its tokens than `reference`, only for the same text."""
    if reference is None or not comparable or not res.seconds:
        return None
    return round(reference.seconds / res.seconds, 3)


def _per_token(res: MethodResult) -> float:
    return res.seconds / max(1, len(res.tokens))


def _report(model, prompt, n, sampling, best: dict, checkpoints) -> dict:
    hf, ar, llama = best.get("hf"), best.get("ar"), best.get("llamacpp")
    report = {}
    for method, res in best.items():
        row = {
            "tokens": len(res.tokens),
            "seconds": round(res.seconds, 3),
            "tokens_per_s": round(res.tokens_per_s, 3),
            "forward_passes": res.forward_passes,
            "tau": round(res.tau, 3) if res.tau else None,
            "accepted_by_source": res.accepted_by_source,
            "output_sha256": output_hash(res.tokens),
        }
        if method == "llamacpp":  # its own rounding: compared by time per token only
            pass
        elif sampling.greedy:
            row.update(_greedy_comparison(model, prompt, sampling, method, res, hf, ar))
        else:
            row.update(_sampled_comparison(method, res, hf, ar))
        if llama is not None:  # another engine's own text: compared by time per token
            row["speedup_vs_llamacpp"] = round(_per_token(llama) / _per_token(res), 3)
        row["quality"] = quality.summary(res.tokens)
        row["curve"] = curves.curve(
            res.times,
            checkpoints or curves.default_checkpoints(n),
            hf.times if hf is not None else None,
        )
        row["timeline"] = curves.timeline(res.times)
        row.update({k: v for k, v in res.extra.items()})
        report[method] = row
    return report


def _greedy_comparison(model, prompt, sampling, method: str, res, hf, ar) -> dict:
    """Greedy text against hf's and ar's: identical or not, the speed ratio where it is, and
    where it leaves each of them."""
    same_as_hf = None if hf is None else res.tokens == hf.tokens
    same_as_ar = None if ar is None else res.tokens == ar.tokens
    cells = {
        "identical_to_hf": same_as_hf,
        "identical_to_ar": same_as_ar,
        "speedup_vs_hf": _ratio(hf, res, bool(same_as_hf)),
        "speedup_vs_ar": _ratio(ar, res, bool(same_as_ar)),
    }
    if hf is not None and method != "hf":
        cells["first_divergence"] = first_divergence(model, prompt, hf.tokens, res.tokens, sampling)
    if ar is not None and method != "ar" and not same_as_ar:
        cells["first_divergence_from_ar"] = first_divergence(
            model, prompt, ar.tokens, res.tokens, sampling
        )
    return cells


def _sampled_comparison(method: str, res, hf, ar) -> dict:
    """Sampled text: transformers draws from another random stream, so its text always
    differs, and exact sampling is judged by the distribution (compare_seeds); exact
    speculative sampling draws once per emitted token, like plain decoding, so with the same
    seed ours writes the same tokens as `ar`."""
    same_as_ar = None if ar is None else res.tokens == ar.tokens
    cells = {
        "identical_to_hf": None,
        "identical_to_ar": same_as_ar if not method.startswith("hf") else None,
        "speedup_vs_hf": (
            round(hf.seconds / res.seconds, 3) if hf is not None and res.seconds else None
        ),
        "speedup_vs_ar": _ratio(ar, res, bool(same_as_ar)),
    }
    if method.endswith("-fastest") and ar is not None:
        # the same distribution as ar's, another text per seed: compared by time per
        # token, over seeds and prompts (the suite's geometric mean)
        cells["speedup_vs_ar"] = round(_per_token(ar) / _per_token(res), 3)
    return cells


COMPARED = ("distinct_1", "distinct_2", "distinct_3", "distinct_4", "repetition_rate")


def run_seeds(
    model,
    prompt: list[int],
    n: int,
    sampling: SamplingSettings,
    methods: Sequence[str],
    seeds: Sequence[int],
    repeat: int = 1,
    drafting: DraftSettings | None = None,
    extra_sources=None,
    drafter=None,
    checkpoints: Sequence[int] | None = None,
    context: ContextSettings | None = None,
    baseline=None,
    warmup: bool = True,
    partial_budget: int | None = None,
    turns: int = 0,
    segments: marathon.Segments | None = None,
    context_limit: int | None = None,
    llama=None,
) -> dict[int, dict]:
    """One `run_bench` per seed, every method sampling with that seed: {seed: report}
    (`warmup`: warm the kernels before the first seed; a suite warms before its first prompt)."""
    runs = {}
    for i, seed in enumerate(seeds):
        runs[seed] = run_bench(
            model,
            prompt,
            n,
            dataclasses.replace(sampling, seed=seed),
            methods,
            repeat,
            drafting,
            warmup=warmup and i == 0,
            extra_sources=extra_sources,
            drafter=drafter,
            checkpoints=checkpoints,
            context=context,
            baseline=baseline,
            partial_budget=partial_budget,
            turns=turns,
            segments=segments,
            context_limit=context_limit,
            llama=llama,
        )
    return runs


def compare_seeds(runs: dict[int, dict], reference: str = "hf") -> dict:
    """Over the seeds: each method's values, mean and std of the quality metrics (and tau,
    tokens/s); each other method against `reference` by Welch's t-test and a permutation test.
    A small p says the methods' output quality differs; exact sampling should not."""

    def r(x):
        return None if x is None else round(x, 5)

    methods = list(next(iter(runs.values())))

    def values(method: str, metric: str) -> list[float]:
        rows = [report[method] for report in runs.values()]
        got = [
            row["quality"].get(metric) if metric in COMPARED else row.get(metric) for row in rows
        ]
        return [v for v in got if v is not None]

    per_method = {}
    for method in methods:
        per_method[method] = {}
        for metric in (*COMPARED, "tau", "tokens_per_s"):
            vals = values(method, metric)
            mean, std = stattest.mean_std(vals)
            per_method[method][metric] = {"values": vals, "mean": r(mean), "std": r(std)}
    tests = {}
    for method in methods if reference in methods else ():
        if method == reference:
            continue
        tests[f"{method} vs {reference}"] = {}
        for metric in COMPARED:
            a, b = values(method, metric), values(reference, metric)
            w = stattest.welch(a, b)
            tests[f"{method} vs {reference}"][metric] = {
                "welch_t": r(w["t"]),
                "welch_df": r(w["df"]),
                "welch_p": r(w["p"]),
                "permutation_p": r(stattest.permutation_p(a, b)),
            }
    return {"seeds": list(runs), "methods": per_method, "tests": tests}


def format_comparison(comparison: dict) -> str:
    """Mean ± std per method over the seeds, then the p-values of each test."""
    lines = [f"over seeds {', '.join(map(str, comparison['seeds']))}: mean ± std"]
    lines.append(f"{'method':18} " + " ".join(f"{m:>15}" for m in COMPARED))
    for method, metrics in comparison["methods"].items():
        cells = []
        for m in COMPARED:
            mean, std = metrics[m]["mean"], metrics[m]["std"]
            cells.append(f"{'-' if mean is None else f'{mean:.3f} ± {std:.3f}':>15}")
        lines.append(f"{method:18} " + " ".join(cells))
    for name, metrics in comparison["tests"].items():
        lines.append(f"{name}: p (Welch / permutation)")
        lines.append(
            "  "
            + "  ".join(
                f"{m} {_p(v['welch_p'])} / {_p(v['permutation_p'])}" for m, v in metrics.items()
            )
        )
    return "\n".join(lines)


def _p(p: float | None) -> str:
    return "-" if p is None else f"{p:.3f}"


def _quality_cells(row: dict) -> str:
    q = row.get("quality") or {}
    d = "/".join(
        "-" if q.get(f"distinct_{k}") is None else f"{q[f'distinct_{k}']:.2f}" for k in range(1, 5)
    )
    rep = q.get("repetition_rate")
    return f"{d:>19} {'-' if rep is None else f'{rep:.2f}':>5}"


def format_table(report: dict) -> str:
    """One row per method. A speedup is shown only against a method that wrote the same text;
    otherwise the cell says `diff. text` (compare the tok/s column instead)."""
    lines = [
        f"{'method':18} {'tokens':>6} {'seconds':>8} {'tok/s':>7} {'tau':>6} "
        f"{'ms/step host+model':>18} {'vs ar':>10} "
        f"{'vs hf':>10} {'vs llama':>9} {'=ar':>4} {'=hf':>4} {'distinct-1/2/3/4':>19} "
        f"{'rep4':>5}  accepted by source"
    ]
    for method, row in report.items():
        llama = row.get("speedup_vs_llamacpp")
        lines.append(
            f"{method:18} {row['tokens']:6d} {row['seconds']:8.2f} {row['tokens_per_s']:7.2f} "
            f"{(row['tau'] or 0):6.2f} {_step_cell(row):>18} "
            f"{_speed_cell(row, 'ar'):>10} {_speed_cell(row, 'hf'):>10} "
            f"{'-' if llama is None else f'{llama:.2f}x':>9} "
            f"{_same_cell(row.get('identical_to_ar'), 'ar' in report):>4} "
            f"{_same_cell(row.get('identical_to_hf'), 'hf' in report):>4} "
            f"{_quality_cells(row)}  {row['accepted_by_source'] or ''}"
        )
    notes = [
        f"{method} leaves hf at token {d['index']} (top-2 gap {d['gap']:.4g}"
        f"{', a near-tie' if d.get('near_tie') else ''})"
        for method, row in report.items()
        if (d := row.get("first_divergence")) and d.get("gap") is not None
    ]
    notes += [f"{method}: {row['note']}" for method, row in report.items() if row.get("note")]
    return "\n".join(lines + notes)


def _step_cell(row: dict) -> str:
    """Host and model milliseconds per step (our methods: transformers' are not split)."""
    stats = row.get("stats")
    if not stats or "host_ms_per_step" not in stats:
        return "-"
    return f"{stats['host_ms_per_step']:.1f} + {stats['model_ms_per_step']:.1f}"


def _speed_cell(row: dict, other: str) -> str:
    ratio = row.get(f"speedup_vs_{other}")
    if ratio is not None:
        return f"{ratio:.2f}x"
    return "diff. text" if row.get(f"identical_to_{other}") is False else "-"


def _same_cell(same, reference_ran: bool) -> str:
    """yes / NO; n/a where the reference ran but no token comparison applies (sampling: hf
    draws from another random stream)."""
    if same is None:
        return "n/a" if reference_ran else "-"
    return "yes" if same else "NO"


def format_long_run(report: dict) -> str:
    """For our methods: where the window first slid, how often the cache was rebuilt, the KV
    tokens held against their cap, and resident memory after warm-up against the end."""
    lines = []
    for method, row in report.items():
        stats, rss = row.get("stats"), row.get("rss_mb") or []
        if not stats:
            continue
        parts = [f"KV held at most {stats['kv_tokens_max']} of {stats['kv_tokens_cap']} tokens"]
        if stats.get("windowed_from") is not None:
            moved = f"{stats.get('shifts', 0) or 0} cache edits, {stats['reprefills']} re-prefills"
            parts.append(
                f"windowed from token {stats['windowed_from']} ({moved}; exact with respect to "
                "the windowed model from there)"
            )
        if len(rss) >= 3:
            warm = rss[len(rss) // 4]
            parts.append(
                f"RSS {warm[1]:.0f} MB at {warm[0]} tokens, {rss[-1][1]:.0f} MB at {rss[-1][0]}"
                f" (peak {max(mb for _, mb in rss):.0f})"
            )
        lines.append(f"{method}: " + "; ".join(parts))
    return "\n".join(lines)

"""Which run is better, and how sure: a paired bootstrap over the cases both runs scored.

The resampling is defined exactly so that it can be reproduced and agrees with
each run's own summary: one ``random.Random(seed)`` stream, consumed in the
summary's order — per benchmark (names sorted) ``samples`` resamples of
``randrange(n)`` drawn ``n`` times, the same picks applied to both runs, the
resample's difference ``sum_a / n - sum_b / n`` (sums left to right from 0);
then the stratified overall resamples, each the difference of the two runs'
``fmean`` of benchmark means. Intervals use the summary's percentile rule;
``share_a_better`` is the fraction of resamples with a difference above 0.
When no case is excluded, each run's resample means are those of its summary.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from ..bench.dataset import Dataset
from ..bench.results import check_against, read_numbered_rows
from ..errors import ConfigError, ResultsError
from ..reporting import quiet
from . import stats
from .noise import JudgeNoise, read_noise
from .sources import Named, load_finished
from .summary import (
    Summary,
    WordStream,
    blocks,
    check_samples,
    interval,
    is_success,
    last_rows,
    paired_means,
    stratified_means,
)
from .summary import summarize as summarize_rows


@dataclass
class Side:
    """One run (or results file) as the comparison sees it."""

    name: str
    answer_model: str | None
    judge_model: str | None
    protocol_version: str | None
    dataset_sha256: str | None
    order: list[str]  # the dataset's case ids, registry order
    benchmark_of: dict[str, str]
    scores: dict[str, float]  # the last successful row's score of each case
    summary: Summary  # its own summary
    judge_noise: JudgeNoise | None = None  # a run graded with --judge-passes K > 1
    answers_of: str | None = None  # the run whose answers it judged (a judge panel's first)
    rows: list[dict[str, Any]] = field(default_factory=list, repr=False)  # as read, checked


def _single(values: set[Any]) -> Any:
    return next(iter(values)) if len(values) == 1 else None


def load_side(named: Named, dataset: Dataset | None, warn: Callable[[str], None] = quiet) -> Side:
    """A run (its dataset, digest-checked; its summary checked against its rows) or a
    results file (with ``dataset``)."""
    run, path = named.run, named.results
    if run is not None:
        found = load_finished(named, dataset, warn)
        config, ds, rows, summary = found.config, found.dataset, found.rows, found.summary
        name, answer, judge = named.name, config.answer_model, config.judge_model
        protocol, digest = config.protocol_version, config.dataset_sha256
    else:
        if dataset is None:
            raise ConfigError(f"{path}: a results file needs --dataset (its cases and digest)")
        numbered = read_numbered_rows(path)
        check_against(numbered, path, dataset.by_id())
        rows = [r for _, r in numbered]
        if not {r["case_id"] for r in rows} & set(dataset.by_id()):
            raise ResultsError(f"{path}: no row for any case of the dataset ({dataset.root})")
        ds, digest = dataset, dataset.sha256
        summary = summarize_rows(
            rows, expected_case_ids=[c["case_id"] for c in ds.cases], dataset_sha256=digest
        )
        ok = [r for r in rows if is_success(r)]
        name = named.name
        answer = _single({r.get("answer_model") for r in ok})
        judge = _single({r.get("judge_model") for r in ok})
        protocol = _single({r.get("protocol_version") for r in rows})
    known = {c["case_id"] for c in ds.cases}
    _, last_ok = last_rows(rows)
    scores = {cid: float(r["score"]) for cid, r in last_ok.items() if cid in known}
    return Side(
        name,
        answer,
        judge,
        protocol,
        digest,
        [c["case_id"] for c in ds.cases],
        {c["case_id"]: c["benchmark"] for c in ds.cases},
        scores,
        summary,
        read_noise(run) if run is not None else None,
        (config.answers_from or run.name) if run is not None else None,
        rows,
    )


def _check_comparable(a: Side, b: Side) -> None:
    """One judge, protocol and dataset digest — or, for runs of the very same answers (a
    judge panel's), other judges: their paired difference is where the judges disagree."""
    same_answers = a.answers_of is not None and a.answers_of == b.answers_of
    for key, label in (
        ("judge_model", "judge model"),
        ("protocol_version", "protocol version"),
        ("dataset_sha256", "dataset digest"),
    ):
        if key == "judge_model" and same_answers:
            continue
        va, vb = getattr(a, key), getattr(b, key)
        if va != vb:
            raise ConfigError(
                f"{a.name} and {b.name} have another {label} ({va} vs {vb}): not comparable"
            )


def check_together(sides: list[Side]) -> None:
    """Sides that may stand in one table: one judge, protocol and dataset digest."""
    for side in sides[1:]:
        _check_comparable(side, sides[0])


def check_overlap(a: Side, b: Side, allow_partial: bool = False) -> list[str]:
    """The cases both runs scored (registry order); runs that share under 90 % of either
    one's scored cases (a smoke run against a full one, say) are refused unless
    ``allow_partial``: their difference would not be about the same cases."""
    both = [c for c in a.order if c in a.scores and c in b.scores]
    if not both:
        raise ConfigError(f"{a.name} and {b.name} have no case scored in both")
    share = min(len(both) / len(a.scores), len(both) / len(b.scores))
    if share < 0.9 and not allow_partial:
        raise ConfigError(
            f"{a.name} has {len(a.scores)} scored cases and {b.name} {len(b.scores)}; they"
            f" share {len(both)} ({share:.0%} of one run's): compare runs of the same cases,"
            " or add --allow-partial"
        )
    return both


class Stats(TypedDict):
    """One row of a paired comparison (a benchmark, or the overall macro mean)."""

    n: int  # paired cases
    mean_a: float
    mean_b: float
    diff: float
    ci95: list[float]
    share_a_better: float | None  # of the resamples; None when every paired case ties
    se_diff: float | None
    mde80: float | None
    p_value: float
    small_n: bool  # fewer than stats.SMALL_N paired cases, or no spread to measure
    p_holm: float | None  # overall only: Holm-adjusted over the call's comparisons
    # --margin: True / False, or None: no verdict (no margin, or a small-n row)
    non_inferior: bool | None


class BenchmarkStats(Stats):
    sd_diff: float | None


class Pairwise(TypedDict):
    """One run against the baseline, over the cases both scored."""

    a: str
    b: str
    paired_cases: int
    excluded_cases: int  # scored in only one of the two (both lists below)
    only_a: int  # scored by a only (failed or missing in b)
    only_b: int
    overall: Stats
    benchmarks: dict[str, BenchmarkStats]


class Leader(TypedDict):
    """A run's own summary, as the leaderboard shows it."""

    name: str
    answer_model: str | None
    judge_model: str | None  # a judge panel's runs differ here (the same answers)
    completed_cases: int
    errors: int  # failed cases: its mean is over fewer cases than a run without them
    overall_macro_mean: float
    overall_ci95: list[float]
    judge_noise: JudgeNoise | None


class Comparison(TypedDict):
    """``compare``'s result (``--json`` prints it as is; the page and figures read it)."""

    protocol_version: str | None
    dataset_sha256: str | None
    judge_model: str | None
    bootstrap_samples: int
    bootstrap_seed: int
    baseline: str
    margin: float | None
    runs: list[Leader]
    comparisons: list[Pairwise]


# A 95% interval's ends are the 2.5th and 97.5th percentiles of the resamples, and a
# p-value moves in steps of 2/samples: under 200 resamples a tail holds fewer than 5 and
# p-values step by more than 0.01, so neither means what it says.
MIN_SAMPLES = 200


def check_compare_samples(samples: int) -> None:
    if samples < MIN_SAMPLES:
        raise ConfigError(
            f"--bootstrap-samples {samples} is too few for a comparison: at least"
            f" {MIN_SAMPLES}, so that each 2.5% tail of the interval holds 5 resamples and"
            " a p-value resolves steps of 0.01"
        )


def paired(
    a: Side, b: Side, samples: int = 10_000, seed: int = 42, *, allow_partial: bool = False
) -> Pairwise:
    """The paired difference of ``a`` against ``b``, per benchmark and overall, with its
    standard error, MDE and bootstrap p-value (:mod:`batchbench.scores.stats`), over the
    cases both scored only (a case one run failed is dropped from both, and counted)."""
    _check_comparable(a, b)
    check_compare_samples(samples)
    both = check_overlap(a, b, allow_partial)
    check_samples(samples, len(both))
    by_benchmark: dict[str, list[str]] = {}
    for case_id in both:  # registry order
        by_benchmark.setdefault(a.benchmark_of[case_id], []).append(case_id)
    names = sorted(by_benchmark)
    sa = {n: np.array([a.scores[c] for c in by_benchmark[n]]) for n in names}
    sb = {n: np.array([b.scores[c] for c in by_benchmark[n]]) for n in names}
    benchmarks: dict[str, BenchmarkStats] = {}
    expected = int(2.04 * samples * sum(1 << len(v).bit_length() for v in sa.values()))
    with WordStream(seed, expected) as stream:
        for name in names:
            n = sa[name].size
            diffs = np.concatenate(
                [
                    np.subtract(*paired_means(sa[name], sb[name], picks))
                    for picks in (
                        stream.picks(n, rows * n).reshape(rows, n) for rows in blocks(samples, n)
                    )
                ]
            )
            mean_a, mean_b = statistics.fmean(sa[name]), statistics.fmean(sb[name])
            sd_diff = stats.sd([a.scores[c] - b.scores[c] for c in by_benchmark[name]])
            se = stats.se_of(sd_diff, n)
            ties = bool(np.all(sa[name] == sb[name]))
            row = _stats(n, mean_a, mean_b, diffs, se, ties, small=n < stats.SMALL_N)
            benchmarks[name] = BenchmarkStats(**row, sd_diff=sd_diff)
        ma, mb = stratified_means([[sa[n] for n in names], [sb[n] for n in names]], stream, samples)
    k = len(names)
    diffs = (
        np.array(list(map(math.fsum, ma.tolist()))) / k
        - np.array(list(map(math.fsum, mb.tolist()))) / k
    )
    se = stats.macro_se([benchmarks[n]["se_diff"] for n in names])
    overall = _stats(
        len(both),
        statistics.fmean([statistics.fmean(sa[n]) for n in names]),
        statistics.fmean([statistics.fmean(sb[n]) for n in names]),
        diffs,
        se,
        all(benchmarks[n]["share_a_better"] is None for n in names),
        # The benchmarks' rule, on the overall's cases; and a macro mean over a
        # benchmark of one case has no spread to measure (its interval is too narrow).
        small=len(both) < stats.SMALL_N or se is None,
    )
    return Pairwise(
        a=a.name,
        b=b.name,
        paired_cases=len(both),
        excluded_cases=len(set(a.scores) ^ set(b.scores)),
        only_a=len(set(a.scores) - set(b.scores)),
        only_b=len(set(b.scores) - set(a.scores)),
        overall=overall,
        benchmarks=benchmarks,
    )


def _stats(
    n: int,
    mean_a: float,
    mean_b: float,
    diffs: np.ndarray,
    se: float | None,
    ties: bool,
    *,
    small: bool,
) -> Stats:
    return Stats(
        n=n,
        mean_a=mean_a,
        mean_b=mean_b,
        diff=mean_a - mean_b,
        ci95=interval(diffs),
        share_a_better=None if ties else int(np.count_nonzero(diffs > 0)) / diffs.size,
        se_diff=se,
        mde80=stats.mde80(se),
        p_value=stats.p_value(diffs),
        small_n=small,
        p_holm=None,
        non_inferior=None,
    )


def _verdicts(comparison: Pairwise, margin: float) -> None:
    """Non-inferiority at ``margin``: a is not worse than b by more than it, when the
    interval's lower end lies above ``-margin``; a small-n row gets no verdict."""
    rows: list[Stats] = [*comparison["benchmarks"].values(), comparison["overall"]]
    for v in rows:
        v["non_inferior"] = None if v["small_n"] else v["ci95"][0] > -margin


def compare(
    sides: list[Side],
    baseline: str | None = None,
    samples: int = 10_000,
    seed: int = 42,
    *,
    margin: float | None = None,
    allow_partial: bool = False,
) -> Comparison:
    """The leaderboard (each run's own summary) and every run against the baseline; the
    overall p-values are Holm-adjusted over the comparisons of this call."""
    if len(sides) < 2:
        raise ConfigError("compare needs at least two runs or results files")
    names = [s.name for s in sides]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"two of the runs compared are named {', '.join(map(repr, twice))}")
    base = next((s for s in sides if s.name == baseline), None) if baseline else sides[0]
    if base is None:
        raise ConfigError(f"--baseline {baseline!r} is not one of {', '.join(names)}")
    if margin is not None and not (margin >= 0 and math.isfinite(margin)):
        raise ConfigError(f"--margin {margin} must be a finite number at or above 0")
    check_compare_samples(samples)
    for side in sides:
        _check_comparable(side, base)
    comparisons = [
        paired(s, base, samples, seed, allow_partial=allow_partial) for s in sides if s is not base
    ]
    for c, adjusted in zip(comparisons, stats.holm([c["overall"]["p_value"] for c in comparisons])):
        c["overall"]["p_holm"] = adjusted
        if margin is not None:
            _verdicts(c, margin)
    return Comparison(
        protocol_version=base.protocol_version,
        dataset_sha256=base.dataset_sha256,
        judge_model=base.judge_model,
        bootstrap_samples=samples,
        bootstrap_seed=seed,
        baseline=base.name,
        margin=margin,
        runs=[
            Leader(
                name=s.name,
                answer_model=s.answer_model,
                judge_model=s.judge_model,
                completed_cases=s.summary["completed_cases"],
                errors=s.summary["errors"],
                overall_macro_mean=s.summary["overall_macro_mean"],
                overall_ci95=s.summary["overall_ci95"],
                judge_noise=s.judge_noise,
            )
            for s in sides
        ],
        comparisons=comparisons,
    )

"""HealthBench runs side by side: a leaderboard of simple-evals' figures, and each run
against the baseline, paired over the examples both graded — overall, per theme and per
axis, as HealthBench's paper shows them.

Each metric is what simple-evals computes (the clipped mean over the examples that have
it); the paired difference, its 95 % interval and the share of resamples where the run
is ahead are batchbench's own: one seeded NumPy generator, the same example picks applied
to both runs, metric by metric in the order shown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from ..bench.results import read_rows
from ..errors import ConfigError, NotFinished
from .healthbench_scores import row_metrics
from .sources import Named, not_finished

SAMPLES = 10_000
SEED = 42


@dataclass(frozen=True)
class HealthBenchSide:
    name: str
    answer_model: str
    judge_model: str
    dataset_sha256: str
    summary: dict[str, Any]  # the run's results.summary.json
    metrics: dict[str, dict[str, float]]  # example → its metrics (the examples graded)
    order: list[str]  # the run's examples, in order


class Paired(TypedDict):
    metric: str
    n: int
    run: float  # the run's clipped mean over the paired examples
    baseline: float
    difference: float
    ci95: list[float]
    share_run_ahead: float


class HealthBenchComparison(TypedDict):
    benchmark: str
    runs: list[dict[str, Any]]
    baseline: str
    comparisons: list[dict[str, Any]]
    bootstrap: dict[str, Any]


def is_healthbench(named: Named) -> bool:
    """A run of HealthBench (its protocol says so); a results file is not a run. A run of
    its meta-eval (the grader against physicians) is refused in one line: its figures
    are its summary's."""
    if named.run is None:
        return False
    grading = named.run.load_config().grading
    if grading.always_given:
        raise ConfigError(
            f"run {named.name!r} is {grading.name}: the grader against physicians, whose"
            " figures are its summary's (status shows them); compare, report and export"
            " read runs of answers"
        )
    return grading.per_item


def load_side(named: Named) -> HealthBenchSide:
    run = named.run
    if run is None:
        raise ConfigError(f"{named.name}: a results file; a HealthBench comparison reads runs")
    config = run.load_config()
    if not run.summary_path.is_file() or not run.results_path.is_file():
        raise NotFinished(not_finished(run))
    import json

    summary = json.loads(run.summary_path.read_text(encoding="utf-8"))
    last: dict[str, Mapping[str, Any]] = {}
    for row in read_rows(run.results_path):
        last[str(row["case_id"])] = row
    metrics = {
        cid: row_metrics(row)
        for cid, row in last.items()
        if "error" not in row and "rubric_items" in row
    }
    return HealthBenchSide(
        named.name,
        config.answer_model,
        config.judge_model,
        config.dataset_sha256,
        summary,
        metrics,
        list(config.case_ids),
    )


def _metric_names(sides: Sequence[HealthBenchSide]) -> list[str]:
    """overall_score, then the themes, then the axes (as the paper lays them out)."""
    found = {name for s in sides for m in s.metrics.values() for name in m}
    themes = sorted(n for n in found if n.startswith("theme:"))
    axes = sorted(n for n in found if n.startswith("axis:"))
    return ["overall_score", *themes, *axes]


def _clipped(values: np.ndarray) -> float:
    return float(np.clip(values.mean(), 0, 1))


def paired(
    a: HealthBenchSide, b: HealthBenchSide, names: Sequence[str], samples: int, seed: int
) -> list[Paired]:
    """``a`` against ``b`` on each metric, over the examples both graded that have it."""
    rng = np.random.default_rng(seed)
    out: list[Paired] = []
    for name in names:
        both = [c for c in a.order if name in a.metrics.get(c, {}) and name in b.metrics.get(c, {})]
        if not both:
            continue
        va = np.asarray([a.metrics[c][name] for c in both])
        vb = np.asarray([b.metrics[c][name] for c in both])
        picks = rng.integers(0, len(both), size=(samples, len(both)))
        diffs = np.clip(va[picks].mean(axis=1), 0, 1) - np.clip(vb[picks].mean(axis=1), 0, 1)
        low, high = np.percentile(diffs, [2.5, 97.5])
        out.append(
            Paired(
                metric=name,
                n=len(both),
                run=_clipped(va),
                baseline=_clipped(vb),
                difference=_clipped(va) - _clipped(vb),
                ci95=[float(low), float(high)],
                share_run_ahead=float((diffs > 0).mean()),
            )
        )
    return out


def check_together(sides: Sequence[HealthBenchSide]) -> None:
    """Runs that may stand in one table: of one HealthBench file."""
    for side in sides[1:]:
        if side.dataset_sha256 != sides[0].dataset_sha256:
            raise ConfigError(
                f"{side.name} and {sides[0].name} graded other HealthBench files (digests"
                f" {side.dataset_sha256[:12]}… and {sides[0].dataset_sha256[:12]}…):"
                " not comparable"
            )


def compare(
    sides: Sequence[HealthBenchSide],
    baseline: str | None = None,
    samples: int = SAMPLES,
    seed: int = SEED,
) -> HealthBenchComparison:
    if len(sides) < 2:
        raise ConfigError("compare needs at least two runs")
    check_together(sides)
    names = [s.name for s in sides]
    base_name = baseline or names[0]
    if base_name not in names:
        raise ConfigError(f"--baseline {base_name!r} is not one of the runs ({', '.join(names)})")
    base = sides[names.index(base_name)]
    metrics = _metric_names(sides)
    runs = [
        {
            "name": s.name,
            "answer_model": s.answer_model,
            "judge_model": s.judge_model,
            "graded": len(s.metrics),
            "score": s.summary.get("score"),
            "bootstrap_std": s.summary.get("metrics", {}).get("overall_score:bootstrap_std"),
            "ci95": s.summary.get("overall_ci95"),
        }
        for s in sides
    ]
    comparisons = [
        {"run": s.name, "metrics": paired(s, base, metrics, samples, seed)}
        for s in sides
        if s is not base
    ]
    return {
        "benchmark": "HealthBench",
        "runs": runs,
        "baseline": base.name,
        "comparisons": comparisons,
        "bootstrap": {"samples": samples, "seed": seed, "rng": "numpy default_rng"},
    }


def compare_text(result: HealthBenchComparison) -> str:
    """The leaderboard (simple-evals' score and bootstrap std, batchbench's interval), then
    each run's paired differences against the baseline."""
    lines = ["HealthBench: score = simple-evals' overall_score (its bootstrap std); 95% CI ours"]
    width = max(len(r["name"]) for r in result["runs"])
    for r in sorted(result["runs"], key=lambda r: -(r["score"] or 0.0)):
        ci = r["ci95"] or [float("nan")] * 2
        lines.append(
            f"  {r['name'].ljust(width)}  score {_f(r['score'])}  std {_f(r['bootstrap_std'])}"
            f"  95% CI [{_f(ci[0])}, {_f(ci[1])}]  graded {r['graded']}  ({r['answer_model']})"
        )
    for c in result["comparisons"]:
        lines.append(f"{c['run']} vs {result['baseline']} (paired over the examples both graded)")
        mwidth = max(len(p["metric"]) for p in c["metrics"])
        for p in c["metrics"]:
            lines.append(
                f"  {p['metric'].ljust(mwidth)}  n {p['n']:>5}  {_f(p['run'])} vs"
                f" {_f(p['baseline'])}  diff {p['difference']:+.4f}"
                f"  95% CI [{p['ci95'][0]:+.4f}, {p['ci95'][1]:+.4f}]"
                f"  ahead in {p['share_run_ahead']:.0%} of resamples"
            )
    boot = result["bootstrap"]
    lines.append(f"bootstrap: {boot['samples']} paired resamples, seed {boot['seed']}")
    return "\n".join(lines)


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def loaded(named: Sequence[Named]) -> list[HealthBenchSide] | None:
    """Every source a HealthBench run: their sides; none: None (BedsideBench's compare);
    a mix is refused in one line."""
    kinds = [is_healthbench(n) for n in named]
    if not any(kinds):
        return None
    if not all(kinds):
        mixed = ", ".join(n.name for n, k in zip(named, kinds) if not k)
        raise ConfigError(f"{mixed}: not HealthBench runs; a comparison holds one benchmark")
    return [load_side(n) for n in named]

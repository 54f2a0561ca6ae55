"""Judge noise: K judge passes per answer (``run --judge-passes K``) and what they say.

The rows and summary keep pass 1 only, by the reference's rules, so the
published artifact is unchanged. Every pass's verdicts go to
``judge_passes.jsonl`` (``case_id``, ``pass``, ``decisions``, ``score``; a crash
may repeat a row, and the last one for a case and pass counts, like the
results file's rule), and once the run is done ``judge_noise.json`` says, over
the cases every pass judged:

* ``item_agreement``: the share of rubric items whose K verdicts all agree;
* ``fleiss_kappa``: Fleiss' kappa of the K passes over every item;
* ``score_sd_mean``: the mean over cases of the sample SD of the K case scores;
* ``overall_ci95_with_judge``: the overall macro interval with the judge's
  noise in it, from :func:`batchbench.scores.stats.two_level_interval`.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._io import atomic_write_text, jsonl_lines
from ..bench.dataset import Case
from ..errors import RunStateError

if TYPE_CHECKING:
    from ..engine.rundir import Run, RunConfig

SAMPLES, SEED = 10_000, 42  # the summary's


def read_passes(run: Run) -> dict[tuple[str, int], dict[str, Any]]:
    """Each case's and pass's row (the last written wins, as in the results file)."""
    path = run.passes_path
    if not path.exists():
        return {}
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for lineno, line in jsonl_lines(path.read_bytes()):
        try:
            row = json.loads(line)
            out[(row["case_id"], int(row["pass"]))] = row
        except (ValueError, KeyError, TypeError):
            raise RunStateError(f"{path}: line {lineno} is not a judge pass row") from None
    return out


def judge_noise(run: Run, config: RunConfig, cases: Mapping[str, Case]) -> dict[str, Any]:
    """What the K passes say of the judge, over the cases every pass judged."""
    from . import stats  # numpy: only when it is computed, not when status reads it

    k = config.judge_passes
    rows = read_passes(run)
    complete = [c for c in config.case_ids if all((c, p) in rows for p in range(1, k + 1))]
    verdicts = [
        [rows[(c, p)]["decisions"][i]["matched"] for p in range(1, k + 1)]
        for c in complete
        for i in range(len(rows[(c, 1)]["decisions"]))
    ]
    by_benchmark: dict[str, list[list[float]]] = {}
    for c in complete:  # registry order
        scores = [float(rows[(c, p)]["score"]) for p in range(1, k + 1)]
        by_benchmark.setdefault(cases[c]["benchmark"], []).append(scores)
    sds = [stats.sd(s) for cases_ in by_benchmark.values() for s in cases_]
    return {
        "passes": k,
        "cases": len(complete),
        "items": len(verdicts),
        "item_agreement": stats.item_agreement(verdicts),
        "fleiss_kappa": stats.fleiss_kappa(verdicts),
        "score_sd_mean": statistics.fmean([s for s in sds if s is not None]) if sds else None,
        "overall_ci95_with_judge": stats.two_level_interval(by_benchmark, SAMPLES, SEED),
        "bootstrap_samples": SAMPLES,
        "bootstrap_seed": SEED,
    }


def write_noise(run: Run, config: RunConfig, cases: Mapping[str, Case]) -> None:
    if config.judge_passes > 1:
        atomic_write_text(run.noise_path, json.dumps(judge_noise(run, config, cases), indent=2))


def read_noise(run: Run) -> dict[str, Any] | None:
    try:
        return json.loads(run.noise_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def noise_text(noise: dict[str, Any]) -> str:
    def show(value: Any, form: str) -> str:
        return "-" if value is None else format(value, form)

    ci = noise.get("overall_ci95_with_judge")
    with_judge = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-"
    return (
        f"judge noise over {noise['passes']} passes ({noise['cases']} cases):"
        f" item agreement {show(noise['item_agreement'], '.1%')},"
        f" Fleiss' kappa {show(noise['fleiss_kappa'], '.3f')},"
        f" mean case-score SD {show(noise['score_sd_mean'], '.3f')};"
        f" overall 95% CI with the judge's noise {with_judge}"
    )

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

import hashlib
import json
import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from .._io import atomic_write_text, jsonl_lines
from ..bench.dataset import Case
from ..errors import RunStateError
from ..formats import MISSING, present

if TYPE_CHECKING:
    from ..engine.rundir import Run
from ..engine.runconfig import RunConfig

SAMPLES, SEED = 10_000, 42  # the summary's


def read_passes(
    run: Run, case_ids: Sequence[str], passes: int, cases: Mapping[str, Case] | None = None
) -> dict[tuple[str, int], dict[str, Any]]:
    """Each case's and pass's row (the last written wins, as in the results file), every
    row checked as a results row is: one of the run's cases and passes, a score from 0 to
    1, and (given the cases) the score its decisions make. A bad row is one line naming
    the file and line: it must never flow into the judge's noise."""
    path = run.passes_path
    if not path.exists():
        return {}
    known = set(case_ids)
    out: dict[tuple[str, int], dict[str, Any]] = {}
    numbered: list[tuple[int, dict[str, Any]]] = []
    for lineno, line in jsonl_lines(path.read_bytes()):
        where = f"{path}: line {lineno}"
        try:
            row = json.loads(line)
        except ValueError:
            raise RunStateError(f"{where} is not a JSON judge pass row") from None
        if not isinstance(row, dict) or row.get("case_id") not in known:
            raise RunStateError(f"{where}: not a judge pass row of one of the run's cases")
        number, score = row.get("pass"), row.get("score")
        if not isinstance(number, int) or isinstance(number, bool) or not 0 < number <= passes:
            raise RunStateError(f"{where}: pass {number!r} is not one of 1 to {passes}")
        if not present(score) or not 0 <= float(score or 0) <= 1:
            raise RunStateError(f"{where}: score {score!r} is not a number from 0 to 1")
        if not isinstance(row.get("decisions"), list):
            raise RunStateError(f"{where}: its decisions are not a list")
        out[(row["case_id"], number)] = row
        numbered.append((lineno, row))
    if cases is not None:  # each score is what its decisions score (polars: only here)
        from ..bench.results import check_against

        check_against(numbered, path, cases)
    return out


class _JudgeNoise(TypedDict):
    passes: int
    cases: int  # cases every pass judged
    items: int
    item_agreement: float | None  # share of items every pass marked alike
    fleiss_kappa: float | None
    score_sd_mean: float | None  # mean over cases of the SD of the K case scores
    overall_ci95_with_judge: list[float] | None
    bootstrap_samples: int
    bootstrap_seed: int


class JudgeNoise(_JudgeNoise, total=False):
    """``judge_noise.json``: what K judge passes say of the judge."""

    judge_passes_sha256: str | None  # the passes file it was derived from


def judge_noise(run: Run, config: RunConfig, cases: Mapping[str, Case]) -> JudgeNoise:
    """What the K passes say of the judge, over the cases every pass judged."""
    from . import stats  # numpy: only when it is computed, not when status reads it

    k = config.judge_passes
    rows = read_passes(run, config.case_ids, k, cases)
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


def write_noise(run: Run, config: RunConfig, cases: Mapping[str, Case], collected: int) -> None:
    """``judge_noise.json``, derived from ``judge_passes.jsonl`` (its digest kept with it).
    ``collected`` is how many judge passes the journal collected: a passes file holding
    fewer rows (truncated, deleted) is refused in one line, and the noise already
    derived is left as it was, never replaced with less."""
    if config.judge_passes <= 1:
        return
    rows = read_passes(run, config.case_ids, config.judge_passes, cases)
    if len(rows) < collected:
        raise RunStateError(
            f"{run.passes_path} holds {len(rows)} judge pass rows, but the run collected"
            f" {collected}: it was cut short or deleted; {run.noise_path.name} is left as it"
            " was (restore the file to derive it again)"
        )
    noise = judge_noise(run, config, cases)
    noise["judge_passes_sha256"] = _digest(run)
    atomic_write_text(run.noise_path, json.dumps(noise, indent=2))


def _digest(run: Run) -> str | None:
    path = run.passes_path
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


NOISE_KEYS = ("passes", "cases", "item_agreement", "fleiss_kappa", "score_sd_mean")


def load_noise(run: Run) -> tuple[JudgeNoise | None, str | None]:
    """The run's judge noise and, when it cannot be shown as fact, why not: a file of the
    wrong shape, or one that no longer matches the passes it was derived from (edited,
    or the passes changed since). Absent: (None, None)."""
    path = run.noise_path
    if not path.exists():
        return None, None
    try:
        noise = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"{path.name} does not read ({exc.__class__.__name__})"
    ci = noise.get("overall_ci95_with_judge") if isinstance(noise, dict) else None
    shaped = (
        isinstance(noise, dict)
        and all(k in noise for k in NOISE_KEYS)
        and isinstance(noise["passes"], int)
        and isinstance(noise["cases"], int)
        and all(noise[k] is None or present(noise[k]) for k in NOISE_KEYS[2:])
        and (ci is None or (isinstance(ci, list) and len(ci) == 2 and all(map(present, ci))))
    )
    if not shaped:
        return None, f"{path.name} is not judge noise as batchbench writes it"
    if noise.get("judge_passes_sha256") != _digest(run) or (ci and ci[0] > ci[1]):
        return None, (
            f"{path.name} does not match {run.passes_path.name}, which it is derived from;"
            f" `batchbench run {run.name}` derives it again"
        )
    found: JudgeNoise = noise  # shaped as written: the keys and their types checked above
    return found, None


def read_noise(run: Run) -> JudgeNoise | None:
    """The run's judge noise when it can be shown as fact (:func:`load_noise`)."""
    return load_noise(run)[0]


def noise_text(noise: JudgeNoise) -> str:
    def show(value: Any, form: str) -> str:
        return MISSING if value is None else format(value, form)

    ci = noise.get("overall_ci95_with_judge")
    with_judge = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else MISSING
    return (
        f"judge noise over {noise['passes']} passes ({noise['cases']} cases):"
        f" item agreement {show(noise['item_agreement'], '.1%')},"
        f" Fleiss' kappa {show(noise['fleiss_kappa'], '.3f')},"
        f" mean case-score SD {show(noise['score_sd_mean'], '.3f')};"
        f" overall 95% CI with the judge's noise {with_judge}"
    )

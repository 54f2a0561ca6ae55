"""A summary on disk and on screen: the reference's bytes, read back checked, as a table."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .._io import atomic_write_text
from ..errors import RunStateError
from ..formats import interval, num
from ..providers import judge_note

if TYPE_CHECKING:  # numpy stays out of `status` and `list`
    from collections.abc import Callable, Sequence

    from .summary import Summary


MAX_SUMMARY_BYTES = 16 * 1024 * 1024


def summary_json(summary: Summary) -> str:
    """The reference's bytes: 2-space indent, NaN as ``NaN``, final newline."""
    return json.dumps(summary, indent=2) + "\n"


def write_summary(path: str | Path, summary: Summary, mode: int = 0o644) -> None:
    atomic_write_text(path, summary_json(summary), mode=mode)


def read_summary(path: Path) -> Summary:
    """A ``results.summary.json``, checked; anything else is a one-line run-state error.

    Only a regular file of a summary's size is opened (a FIFO or a link to
    ``/dev/zero`` would hang or never end), and it must have a summary's shape.
    """
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise RunStateError(f"{path}: not a regular file, so not a summary")
        if info.st_size > MAX_SUMMARY_BYTES:
            raise RunStateError(f"{path}: {info.st_size:,} bytes, too large for a summary")
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise RunStateError(f"{path}: no summary yet") from None
    except OSError as exc:
        raise RunStateError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except (ValueError, RecursionError):
        raise RunStateError(f"{path}: damaged (not a summary's JSON)") from None
    if not _summary_shaped(data):
        raise RunStateError(f"{path}: damaged (not a summary's fields)")
    return cast("Summary", data)


def summary_of(
    path: Path,
    rows: Sequence[dict[str, Any]],
    case_ids: Sequence[str],
    dataset_sha256: str | None,
    warn: Callable[[str], None],
) -> Summary:
    """A run's summary, checked against the rows it summarises (a run's rows, in
    registry order: :func:`..bench.results.registry_order`): the file's when it agrees
    with them in every exact field (:func:`.exact.disagreement`), else the rows' own —
    computed, the bootstrap run again — said in one line. A summary left stale by rows
    written since, or edited by hand, never states a figure."""
    from .exact import disagreement

    summary = read_summary(path)
    wrong = disagreement(summary, rows, case_ids, dataset_sha256)
    if wrong is None:
        return summary
    from .summary import DEFAULT_SAMPLES, DEFAULT_SEED, summarize

    samples, seed = summary.get("bootstrap_samples"), summary.get("bootstrap_seed")
    fresh = summarize(
        rows,
        samples if isinstance(samples, int) and samples > 0 else DEFAULT_SAMPLES,
        seed if isinstance(seed, int) else DEFAULT_SEED,
        expected_case_ids=case_ids,
        dataset_sha256=dataset_sha256,
    )
    warn(
        f"warning: {path} does not summarise its run's rows ({wrong}): stale or edited, so"
        " the figures here are computed from the rows; rerun the run's command to rewrite it"
    )
    return fresh


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _summary_shaped(data: Any) -> bool:
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), dict):
        return False
    pairs = [
        data.get("overall_ci95"),
        *(b.get("ci95") for b in data["benchmarks"].values() if isinstance(b, dict)),
    ]
    return (
        all(
            isinstance(b, dict) and _number(b.get("mean")) and isinstance(b.get("n"), int)
            for b in data["benchmarks"].values()
        )
        and all(isinstance(p, list) and len(p) == 2 and all(map(_number, p)) for p in pairs)
        and _number(data.get("overall_macro_mean"))
        and all(isinstance(data.get(k), int) for k in ("completed_cases", "errors"))
    )


def summary_table(summary: Summary) -> str:
    """A compact table: per-benchmark n, mean and interval, then the overall line (a
    HealthBench run's: simple-evals' metrics)."""
    if "metrics" in summary:  # HealthBench's, or its meta-eval's
        from . import healthbench_meta_scores, healthbench_scores

        meta = "pairwise_model_f1_balanced" in cast("dict[str, Any]", summary)["metrics"]
        found = cast("dict[str, Any]", summary)
        if meta:
            return healthbench_meta_scores.summary_text(found)
        return healthbench_scores.summary_text(found)
    names = list(summary["benchmarks"])
    width = max([len("overall (macro)"), *(len(n) for n in names)])
    note = judge_note(str(summary["judge_model"])) if summary.get("judge_service") else None
    lines = [
        f"answer model {summary['answer_model']}  judge {summary['judge_model']}"
        + (f" ({note})" if note else "")
        + f"  protocol {summary['protocol_version']}",
        f"dataset {summary['dataset_sha256']}",
        f"{'benchmark'.ljust(width)}  {'n':>4}  {'mean':>6}  95% CI",
    ]
    for name in names:
        b = summary["benchmarks"][name]
        mean, ci = num(b["mean"], width=6), interval(b["ci95"], width=5)
        lines.append(f"{name.ljust(width)}  {b['n']:>4}  {mean}  {ci}")
    lines.append(
        f"{'overall (macro)'.ljust(width)}  {summary['completed_cases']:>4}"
        f"  {num(summary['overall_macro_mean'], width=6)}"
        f"  {interval(summary['overall_ci95'], width=5)}"
    )
    lines.append(
        f"completed {summary['completed_cases']}  errors {summary['errors']}"
        f"  bootstrap {summary['bootstrap_samples']} resamples, seed {summary['bootstrap_seed']}"
    )
    return "\n".join(lines)

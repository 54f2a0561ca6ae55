"""Human-readable and file renderings of a summary."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ._io import atomic_write_text


def summary_json(summary: dict[str, Any]) -> str:
    """The reference's bytes: 2-space indent, NaN as ``NaN``, final newline."""
    return json.dumps(summary, indent=2) + "\n"


def write_summary(path: str | Path, summary: dict[str, Any]) -> None:
    atomic_write_text(path, summary_json(summary), mode=0o644)


def _num(value: Any, width: int = 6) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a".rjust(width)
    return f"{value:.3f}".rjust(width)


def _ci(ci: Any) -> str:
    return f"[{_num(ci[0], 5)}, {_num(ci[1], 5)}]"


def summary_table(summary: dict[str, Any]) -> str:
    """A compact table: per-benchmark n, mean and interval, then the overall line."""
    names = list(summary["benchmarks"])
    width = max([len("overall (macro)"), *(len(n) for n in names)])
    lines = [
        f"answer model {summary['answer_model']}  judge {summary['judge_model']}"
        f"  protocol {summary['protocol_version']}",
        f"dataset {summary['dataset_sha256']}",
        f"{'benchmark'.ljust(width)}  {'n':>4}  {'mean':>6}  95% CI",
    ]
    for name in names:
        b = summary["benchmarks"][name]
        lines.append(f"{name.ljust(width)}  {b['n']:>4}  {_num(b['mean'])}  {_ci(b['ci95'])}")
    lines.append(
        f"{'overall (macro)'.ljust(width)}  {summary['completed_cases']:>4}"
        f"  {_num(summary['overall_macro_mean'])}  {_ci(summary['overall_ci95'])}"
    )
    lines.append(
        f"completed {summary['completed_cases']}  errors {summary['errors']}"
        f"  bootstrap {summary['bootstrap_samples']} resamples, seed {summary['bootstrap_seed']}"
    )
    return "\n".join(lines)

"""``batchbench summarize``: a results file's rows checked, summarised, and written where
they may be — never over a summary of another dataset or selection."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ..bench.dataset import Dataset, load_dataset, select_cases
from ..bench.results import check_against, read_numbered_rows, summary_path
from ..engine.rundir import SUMMARY_FILE, Run
from ..errors import ConfigError, ResultsError
from .summary import Summary, summarize
from .summary_file import write_summary


def summarize_results(
    results: Path,
    dataset: Path | None,
    *,
    smoke: bool = False,
    limit: int | None = None,
    benchmarks: tuple[str, ...] = (),
    samples: int = 10_000,
    seed: int = 42,
    output: Path | None = None,
    force: bool = False,
) -> tuple[Summary, Path, list[str]]:
    """``batchbench summarize``: check the rows, summarise them, guard the target, write.

    Returns the summary, where it was written, and notes for the user.
    """
    expected: list[str] | None = None
    digest: str | None = None
    notes: list[str] = []
    numbered = read_numbered_rows(results)
    if dataset is not None:
        ds = load_dataset(dataset)
        selected = select_cases(ds, smoke=smoke, limit=limit, benchmarks=benchmarks)
        expected, digest = [c["case_id"] for c in selected], ds.sha256
        check_against(numbered, results, ds.by_id())
        present = {row["case_id"] for _, row in numbered}
        if not present & set(expected):
            raise ResultsError(
                f"{results}: no row for any of the {len(expected)} selected cases of {dataset}"
            )
        notes += _missing(results, expected, present, ds, benchmarks)
    elif smoke or limit is not None or benchmarks:
        raise ConfigError("--smoke, --limit and --benchmark select from a dataset: pass --dataset")
    elif not numbered:
        raise ResultsError(f"{results}: no rows")
    rows = [row for _, row in numbered]
    summary = summarize(
        rows, samples=samples, seed=seed, expected_case_ids=expected, dataset_sha256=digest
    )
    out = output or summary_path(results)
    if not force:
        _guard_target(out, summary, expected)
    mode = out.stat().st_mode & 0o777 if out.exists() else 0o644  # a run's stays private
    write_summary(out, summary, mode=mode)
    successes = Counter(r["case_id"] for r in rows if "error" not in r)
    several = sum(
        1 for cid, n in successes.items() if n > 1 and (expected is None or cid in expected)
    )
    if several:
        notes.append(
            f"note: {several} case(s) have several successful rows; the last of each counts"
        )
    return summary, out, notes


def _missing(
    results: Path, expected: list[str], present: set[str], ds: Dataset, benchmarks: tuple[str, ...]
) -> list[str]:
    """A warning when selected cases have no row, naming the selection the rows match."""
    missing = [c for c in expected if c not in present]
    if not missing:
        return []
    hint = ""
    ids = [c for c in expected if c in present]
    smoke = [c["case_id"] for c in select_cases(ds, smoke=True, benchmarks=benchmarks)]
    if set(ids) == set(smoke):
        hint = "; the rows are the smoke selection: add --smoke"
    elif ids == expected[: len(ids)]:
        hint = f"; the rows are the first {len(ids)} cases: add --limit {len(ids)}"
    return [
        f"warning: {len(missing)} of the {len(expected)} selected cases have no row in"
        f" {results} (they count as missing, not as errors){hint}"
    ]


def _guard_target(out: Path, summary: Summary, expected: list[str] | None) -> None:
    """Never replace a summary of another dataset or selection without --force."""
    if not out.exists():
        return
    advice = "write it elsewhere with --output FILE, or replace it with --force"
    run = Run(out.parent)
    if out.name == SUMMARY_FILE and run.exists():  # a run's own summary
        config = run.load_config()
        if summary["dataset_sha256"] != config.dataset_sha256 or expected != config.case_ids:
            raise ConfigError(
                f"{out} is run {config.name!r}'s own summary, of its dataset and selection"
                f" ({len(config.case_ids)} cases, digest {config.dataset_sha256[:12]}); {advice}"
            )
        return
    try:
        existing = json.loads(out.read_text(encoding="utf-8"))
        old_n = {b: int(v["n"]) for b, v in existing["benchmarks"].items()}
        old_digest = existing["dataset_sha256"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise ConfigError(f"{out} exists and is not a summary; {advice}") from None
    new_n = {b: v["n"] for b, v in summary["benchmarks"].items()}
    new_digest = summary["dataset_sha256"]
    if old_digest != new_digest:
        raise ConfigError(
            f"{out} exists with another dataset digest ({old_digest} → {new_digest}); {advice}"
        )
    # More rows since (a run that went on) only add cases; fewer or other
    # benchmarks, or fewer cases in one, is another selection.
    if set(old_n) != set(new_n) or any(new_n[b] < old_n[b] for b in old_n):
        raise ConfigError(f"{out} exists with another selection of cases; {advice}")

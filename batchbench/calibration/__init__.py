"""The judge calibrated against physicians: a blind labelling sheet (:mod:`.sheet`), their
verdicts read back (:mod:`.labels`), agreement and the PPI++ corrected score
(:mod:`.ppi`, :mod:`.analysis`), as people read them (:mod:`.text`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..bench.dataset import Case, Dataset
from ..bench.results import check_against, read_numbered_rows, registry_order
from ..errors import NotFinished
from ..reporting import quiet
from ..scores.sources import Named, not_finished, run_dataset
from ..scores.summary import Summary, last_rows
from ..scores.summary_file import summary_of


@dataclass(frozen=True)
class Graded:
    """A finished run as calibration reads it: the rows that count, its summary, its cases."""

    name: str
    rows: list[dict[str, Any]]
    summary: Summary
    cases: dict[str, Case]


def load_run(
    named: Named,
    dataset: Dataset | Path | None = None,
    *,
    errors: bool = False,
    warn: Callable[[str], None] = quiet,
) -> Graded:
    """A finished run's scored rows (``errors``: and the rows of the cases that ended in
    an error, each case's last), its summary (checked against its rows:
    :func:`..scores.summary_file.summary_of`) and its cases."""
    run = named.run
    if run is None:
        raise NotFinished(f"{named.name}: calibrate reads runs (by name), not results files")
    config = run.load_config()
    ds = run_dataset(config, dataset)
    if not run.summary_path.exists():
        raise NotFinished(not_finished(run))
    numbered = read_numbered_rows(named.results)
    check_against(numbered, named.results, ds.by_id())
    last, last_ok = last_rows([r for _, r in numbered])
    chosen = set(config.case_ids)
    cases = {c["case_id"]: c for c in ds.cases if c["case_id"] in chosen}
    rows = [r for cid, r in (last if errors else last_ok).items() if cid in cases]
    ordered = registry_order([r for _, r in numbered], config.case_ids)
    summary = summary_of(run.summary_path, ordered, config.case_ids, config.dataset_sha256, warn)
    return Graded(named.name, rows, summary, cases)

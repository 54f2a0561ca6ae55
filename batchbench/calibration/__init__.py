"""The judge calibrated against physicians: a blind labelling sheet (:mod:`.sheet`), their
verdicts read back (:mod:`.labels`), agreement and the PPI++ corrected score
(:mod:`.ppi`, :mod:`.analysis`), as people read them (:mod:`.text`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..bench.dataset import Case, Dataset
from ..errors import ConfigError
from ..reporting import quiet
from ..scores.sources import Named, load_finished

if TYPE_CHECKING:  # numpy (the summary's) stays out of the CLI's import
    from ..scores.summary import Summary
    from .judge_choice import PanelCalibration
    from .labels import Label


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
    if named.run is None:
        folder = named.results.parent
        hint = ""
        if (folder / "run.json").is_file():  # a run's own rows: say how to name that run
            hint = f"; this one is run {folder.name!r}'s: calibrate {folder.name} --jobs-dir"
            hint += f" {folder.parent}"
        raise ConfigError(
            f"{named.results}: calibrate reads a run by its name (its judge's decisions, its"
            f" dataset and configuration), not a results file{hint}"
        )
    if named.run.load_config().grading.per_item:
        raise ConfigError(
            f"run {named.name!r} graded HealthBench: calibrating its grader against"
            " physicians is built for BedsideBench runs only, so far (HealthBench's own"
            " meta-eval file, given as --dataset, grades the grader against physicians)"
        )
    found = load_finished(named, dataset, warn)
    from ..scores.summary import last_rows

    last, last_ok = last_rows(found.rows)
    chosen = set(found.config.case_ids)
    cases = {c["case_id"]: c for c in found.dataset.cases if c["case_id"] in chosen}
    rows = [r for cid, r in (last if errors else last_ok).items() if cid in cases]
    summary = found.summary
    return Graded(named.name, rows, summary, cases)


def judge_panel(
    named: Named,
    labels: Sequence[Label],
    graded: Graded,
    warn: Callable[[str], None] = quiet,
) -> PanelCalibration | None:
    """A judge panel's judges against the same labels (#50), when the run named has a
    panel (its other judges' runs read beside it); else None."""
    from ..scores.judge_rankings import panel_of
    from .judge_choice import calibrate_panel

    if named.run is None:
        return None
    members = panel_of(named.run)
    if len(members) < 2:
        return None
    graded_of = {
        judge: graded
        if run.name == graded.name
        else load_run(Named(run.name, run.results_path, run), warn=warn)
        for judge, run in members.items()
    }
    return calibrate_panel(graded_of, labels, graded.cases)

"""Each format's export of named runs (or results files, for the table): the run
loaded once, then handed to its format's writer (:mod:`.tables`, :mod:`.eee`,
:mod:`.inspect_log`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from ..engine.rundir import Run
from ..errors import ConfigError
from ..scores.sources import Named


def export_table(
    sources: list[Named],
    output: Path,
    fmt: str,
    dataset: Path | None,
    decisions: bool,
    warn: Callable[[str], None],
) -> int:
    """The runs (or files) as one table; how many rows it has. Runs compare would refuse
    together (other cases, other datasets) are refused here too."""
    from ..bench.dataset import load_dataset
    from ..scores import healthbench_compare as hb
    from ..scores.compare import check_together, load_side
    from .tables import export_frame, write_export

    healthbench = hb.loaded(sources)  # HealthBench runs: of one file, or refused
    if healthbench is not None:
        hb.check_together(healthbench)
    else:
        ds = load_dataset(dataset) if dataset is not None else None
        check_together([load_side(n, ds, warn) for n in sources])
    frame = export_frame([(n.name, n.results) for n in sources], decisions)
    write_export(frame, output, fmt)
    return frame.height


def export_eee(
    named: Named,
    out: Path,
    labels: list[Path],
    dataset: Path | None,
    warn: Callable[[str], None],
) -> Path:
    """One run's Every Eval Ever records under ``out`` (:mod:`.eee`); with physicians'
    labels, each benchmark's PPI++ corrected score as a second result."""
    from ..calibration import load_run
    from ..calibration.analysis import calibrate
    from ..calibration.labels import read_labels
    from . import eee, eee_schema

    if named.run is None:
        raise ConfigError(f"{named.name}: --format eee exports runs (by name), not results files")
    if named.run.load_config().grading.per_item:
        if labels:
            raise ConfigError("--labels: PPI++ against physicians is built for BedsideBench runs")
        return _healthbench_eee(named.run, out)
    graded = load_run(named, dataset, warn=warn)
    calibrated = None
    if labels:
        found = read_labels(labels, graded.name, graded.cases, None, keep_unsure=True)
        result = calibrate(graded.name, graded.rows, graded.summary, found, graded.cases)
        calibrated = {name: b["corrected"] for name, b in result["benchmarks"].items()}
    from ..engine.provenance import provenance

    config = named.run.load_config()
    run_id = config.run_id
    aggregate, instances, stem = eee.records(
        graded.rows,
        graded.summary,
        graded.cases,
        run_id=run_id,
        now=time.time(),
        calibrated=calibrated,
        provenance=provenance(named.run.state(config.case_ids), config),
    )
    return eee_schema.write(out, aggregate, instances, stem)


class _Finished(NamedTuple):
    """A finished HealthBench run as its exports read it."""

    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    provenance: dict[str, Any]
    run_id: str
    started: str
    finished: str


def _healthbench(run: Run) -> _Finished:
    import json
    from datetime import datetime, timezone

    from ..bench.results import read_rows
    from ..engine.provenance import provenance
    from ..errors import NotFinished
    from ..scores.sources import not_finished

    if not run.summary_path.is_file():
        raise NotFinished(not_finished(run))
    config = run.load_config()
    state = run.state(config.case_ids)
    when = [
        datetime.fromtimestamp(t or 0, timezone.utc).isoformat()
        for t in (state.started, state.ended)
    ]
    return _Finished(
        read_rows(run.results_path),
        json.loads(run.summary_path.read_text(encoding="utf-8")),
        provenance(state, config),
        config.run_id,
        *when,
    )


def _healthbench_eee(run: Run, out: Path) -> Path:
    """A HealthBench run's records (:mod:`.eee_healthbench`)."""
    from . import eee_healthbench, eee_schema

    found = _healthbench(run)
    aggregate, instances, stem = eee_healthbench.records(
        found.rows,
        found.summary,
        run_id=found.run_id,
        now=time.time(),
        finished=found.finished,
        provenance=found.provenance,
    )
    return eee_schema.write(out, aggregate, instances, stem)


def export_inspect(
    named: Named, path: Path, dataset: Path | None, warn: Callable[[str], None]
) -> Path:
    """One run as an Inspect log at ``path`` (:mod:`.inspect_log`)."""
    from ..calibration import load_run
    from ..engine.provenance import provenance
    from ..engine.rows import answer_columns, answer_usage
    from . import inspect_log

    if named.run is None:
        raise ConfigError(f"{named.name}: --format inspect exports runs (by name), not files")
    if named.run.load_config().grading.per_item:  # HealthBench
        from . import inspect_healthbench

        found = _healthbench(named.run)
        path.parent.mkdir(parents=True, exist_ok=True)
        inspect_healthbench.write(
            path,
            found.rows,
            found.summary,
            run_name=named.name,
            run_id=found.run_id,
            started=found.started,
            finished=found.finished,
            usage=answer_usage(named.run),
            provenance=found.provenance,
        )
        return path
    graded = load_run(named, dataset, errors=True, warn=warn)
    path.parent.mkdir(parents=True, exist_ok=True)
    config = named.run.load_config()
    inspect_log.write(
        path,
        graded.rows,
        graded.summary,
        graded.cases,
        run_name=named.name,
        run_id=config.run_id,
        usage=answer_usage(named.run),
        served={
            case: line["served_model"]
            for case, line in answer_columns(named.run, ("served_model",)).items()
            if line["served_model"]
        },
        provenance=provenance(named.run.state(config.case_ids), config),
    )
    return path

"""Each format's export of named runs (or results files, for the table): the run
loaded once, then handed to its format's writer (:mod:`.tables`, :mod:`.eee`,
:mod:`.inspect_log`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

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
    from ..scores.compare import check_together, load_side
    from .tables import export_frame, write_export

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
    from . import eee

    if named.run is None:
        raise ConfigError(f"{named.name}: --format eee exports runs (by name), not results files")
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
    return eee.write(out, aggregate, instances, stem)


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

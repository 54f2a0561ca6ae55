"""``export``'s formats that other tools read: Every Eval Ever records and Inspect logs,
one run at a time (the writers are :mod:`..views.eee` and :mod:`..views.inspect_log`)."""

from __future__ import annotations

from pathlib import Path

from ..scores.sources import Named
from .common import warn


def export_eee(named: Named, out: Path, labels: list[Path], dataset: Path | None) -> Path:
    """One run's Every Eval Ever records under ``out`` (:mod:`..views.eee`)."""
    import time

    from ..calibration import load_run
    from ..calibration.analysis import calibrate
    from ..calibration.labels import read_labels
    from ..errors import ConfigError
    from ..views import eee

    if named.run is None:
        raise ConfigError(f"{named.name}: --format eee exports runs (by name), not results files")
    graded = load_run(named, dataset, warn=warn)
    calibrated = None
    if labels:
        found = read_labels(labels, graded.name, graded.cases, None)
        result = calibrate(graded.name, graded.rows, graded.summary, found, graded.cases)
        calibrated = {name: b["corrected"] for name, b in result["benchmarks"].items()}
    run_id = named.run.load_config().run_id
    aggregate, instances, stem = eee.records(
        graded.rows,
        graded.summary,
        graded.cases,
        run_id=run_id,
        now=time.time(),
        calibrated=calibrated,
    )
    return eee.write(out, aggregate, instances, stem)


def export_inspect(named: Named, path: Path, dataset: Path | None) -> Path:
    """One run as an Inspect log at ``path`` (:mod:`..views.inspect_log`)."""
    from ..calibration import load_run
    from ..engine.rows import answer_usage
    from ..errors import ConfigError
    from ..views import inspect_log

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
    )
    return path

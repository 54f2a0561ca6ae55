"""What ``compare``, ``report`` and ``export`` are given: runs or results files, one rule.

A run is named by its name (it lives in the jobs folder; a name has no path
separator), anything else is a path to a reference-format results file. A
run's name wins over a file of the same name in the current folder, and a
folder is never taken for a run: a run elsewhere is named with ``--jobs-dir``.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..bench.dataset import Dataset, load_dataset
from ..bench.grading import load
from ..engine.runconfig import NAME_RE, RunConfig
from ..engine.rundir import Run
from ..errors import ConfigError, NotFinished, ResultsError, UnknownRun
from ..reporting import quiet
from ..storage import shown

if TYPE_CHECKING:
    from .summary import Summary


@dataclass(frozen=True)
class Named:
    """A run or a results file, as named on the command line."""

    name: str
    results: Path
    run: Run | None  # None for a results file


def resolve(item: str, jobs_dir: Path) -> Named:
    if NAME_RE.match(item) and item not in (".", ".."):
        run = Run(Path(jobs_dir) / item)
        if run.exists():
            return Named(run.name, run.results_path, run)
    path = Path(item)
    if path.is_file():
        return Named(path.stem, path, None)
    if path.is_dir():
        raise ConfigError(
            f"{item!r} is a folder: name a run by its name (with --jobs-dir for its folder)"
            " or give a results file"
        )
    raise UnknownRun(f"no run {item!r} in {shown(Path(jobs_dir))}, and no such results file")


_LOADED: dict[Path, tuple[int, Dataset]] = {}  # this process's loads, by folder


def _fingerprint(root: Path) -> int:
    """Every file under ``root`` by name, size and modification time (0.1 s at 25,000
    cases): a dataset read earlier in this process is read again once any has changed."""
    seen = []
    for folder, subfolders, files in os.walk(root):
        subfolders.sort()
        for name in sorted(files):
            st = os.stat(os.path.join(folder, name))
            seen.append((folder, name, st.st_mtime_ns, st.st_size))
    return hash(tuple(seen))


def _load(path: Path) -> Dataset:
    """The dataset at ``path``, read once while its files stand unchanged: compare, report
    and export read one dataset for every run they show (2.7 s a read at 25,000 cases)."""
    key, mark = path.resolve(), _fingerprint(path)
    found = _LOADED.get(key)
    if found is None or found[0] != mark:
        _LOADED[key] = found = (mark, load_dataset(path))
    return found[1]


def run_dataset(config: RunConfig, given: Dataset | Path | None = None) -> Dataset:
    """The dataset a run was made with: the one given if it is that dataset, else the
    one at the path the run recorded, and only if it still has the run's digest (a
    case moved or a rubric edited since would show numbers of another dataset)."""
    if isinstance(given, Dataset) and given.sha256 == config.dataset_sha256:
        return given
    path = given if isinstance(given, Path) else Path(config.dataset)
    ds = _load(path) if path.is_dir() else load(path)[0]  # a file: HealthBench's JSONL
    if ds.sha256 != config.dataset_sha256:
        raise ConfigError(
            f"{path} is not the dataset run {config.name!r} was made with: its digest is"
            f" {ds.sha256[:12]}…, the run's {config.dataset_sha256[:12]}…"
            " (pass --dataset with the run's dataset)"
        )
    return ds


def not_finished(run: Run) -> str:
    """What show, export, report and compare say of a run with no results yet."""
    return f"run {run.name!r} is not finished yet (no results): see `batchbench status {run.name}`"


def resolve_all(items: Sequence[str], jobs_dir: Path, labels: Sequence[str] = ()) -> list[Named]:
    """Each item resolved and named (by ``--label``, in order, when given); the same
    source twice, or two sources of one name, is refused with the names said."""
    for item in items:  # a labels sheet where a run is expected: --labels was meant
        if item.lower().endswith((".csv", ".tsv")):
            raise ConfigError(
                f"{item!r} is a sheet, not a run or a results file: physicians' labels are"
                " given with --labels FILE"
            )
    for label in labels:  # --label typed for --labels
        if label.lower().endswith((".csv", ".tsv", ".json", ".jsonl")) or Path(label).is_file():
            raise ConfigError(
                f"--label {label!r} names a file: physicians' labels are given with --labels"
                " FILE (--label NAME names each run on the page, in order)"
            )
    named = [resolve(item, jobs_dir) for item in items]
    if labels:
        if len(labels) != len(named):
            raise ConfigError(
                f"--label: {len(labels)} label(s) for {len(named)} runs or files;"
                " give one per source, in order"
            )
        named = [dataclasses.replace(n, name=label) for n, label in zip(named, labels)]
    paths = Counter(n.results.resolve() for n in named)
    for path, times in paths.items():
        if times > 1:
            raise ConfigError(f"{path} is given {times} times")
    names = Counter(n.name for n in named)
    for name, times in names.items():
        if times > 1:
            places = " and ".join(str(n.results) for n in named if n.name == name)
            raise ConfigError(
                f"{times} of the sources are named {name!r} ({places}): name each with"
                " --label NAME, once per source in order"
            )
    return named


@dataclass(frozen=True)
class Finished:
    """A finished run as every reader of one takes it: its configuration, its dataset
    (digest-checked), its rows in file order (each checked against its case) and its
    summary (checked against those rows)."""

    config: RunConfig
    dataset: Dataset
    rows: list[dict[str, Any]]
    summary: Summary


def load_finished(
    named: Named,
    dataset: Dataset | Path | None = None,
    warn: Callable[[str], None] = quiet,
) -> Finished:
    """The one loader of a finished run (compare, report, calibrate, export read runs
    through it); a run without its summary is :class:`NotFinished`, naming what to do."""
    from ..bench.results import check_against, read_numbered_rows, registry_order
    from .summary_file import summary_of

    run = named.run
    if run is None:
        raise ConfigError(f"{named.name}: a results file, not a run")
    config = run.load_config()
    ds = run_dataset(config, dataset)
    if not run.summary_path.exists() and not run.summary_path.is_symlink():
        raise NotFinished(not_finished(run))
    if not named.results.exists():  # its rows are every figure's source: none is made up
        raise ResultsError(
            f"{named.results}: file not found — the run's rows, from which every figure is"
            " computed, are missing: nothing is exported or shown without them"
        )
    numbered = read_numbered_rows(named.results)
    check_against(numbered, named.results, ds.by_id())
    rows = [r for _, r in numbered]
    ordered = registry_order(rows, config.case_ids)
    summary = summary_of(run.summary_path, ordered, config.case_ids, config.dataset_sha256, warn)
    return Finished(config, ds, rows, summary)

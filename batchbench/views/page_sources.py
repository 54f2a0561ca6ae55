"""What a report page is made from: each run's (or results file's) rows, replies, cost,
state, request files and flow of cases, read once (:func:`load_sources`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..bench.dataset import Dataset, load_dataset
from ..costs.rollup import RunCost
from ..engine.provenance import provenance
from ..engine.replies import latest_requests, read_replies
from ..errors import ConfigError
from ..kinds import STAGES, Stage
from ..reporting import quiet
from ..scores.compare import Side, load_side
from ..scores.flow import flow_of_rows, flow_of_run
from ..scores.sources import resolve_all, run_dataset
from ..scores.summary import last_rows
from .page_prompts import request_files
from .status import run_status


@dataclass
class Source:
    side: Side
    rows: dict[str, dict[str, Any]]  # the last row of each case
    # (case id, stage) → the raw reply of its latest request (runs only)
    replies: dict[tuple[str, Stage], str] = field(default_factory=dict)
    cost: RunCost | None = None
    state: str | None = None  # the run's status (runs only)
    pending: int = 0  # its cases still without a final row
    request_files: dict[str, str] = field(default_factory=dict)  # name → SHA-256 (runs)
    flow: list[dict[str, Any]] = field(default_factory=list)  # :mod:`..scores.flow`'s
    plan: dict[str, str] | None = None  # the sealed analysis plan the run recorded
    provenance: dict[str, Any] | None = None  # requested and served models (runs only)
    judge_passes: int = 1  # judge requests per answer (runs: as configured)


def load_sources(
    items: list[str],
    jobs_dir: Path,
    dataset: Path | None,
    labels: Sequence[str] = (),
    warn: Callable[[str], None] = quiet,
) -> tuple[list[Source], Dataset]:
    ds = load_dataset(dataset) if dataset is not None else None
    sources = []
    for named in resolve_all(items, jobs_dir, labels):
        side = load_side(named, ds, warn)
        run = named.run
        rows, _ = last_rows(side.rows)  # as the side read them
        source = Source(side, rows)
        if run is not None:
            config = run.load_config()
            ds = ds or run_dataset(config)
            state = run.state(config.case_ids)
            replies = read_replies(run, config, state)
            for stage in STAGES:
                latest = latest_requests(state, stage)
                for case_id in rows:
                    request = latest.get(case_id)
                    if request in replies:
                        source.replies[case_id, stage] = replies[request]
            status = run_status(run, state=state)
            source.cost, source.state = status["cost"], status["status"]
            source.pending = status["cases"]["pending"]
            source.request_files = request_files(run.requests_dir)
            source.flow = flow_of_run(state, config.case_ids, len(ds.cases))
            source.plan = config.analysis_plan
            source.provenance = provenance(state, config)
            source.judge_passes = config.judge_passes
        sources.append(source)
    if ds is None:
        raise ConfigError("report needs --dataset for results files")
    for source in sources:
        if not source.flow:  # a results file: its rows tell what they can
            source.flow = flow_of_rows(source.rows, len(ds.cases))
    return sources, ds

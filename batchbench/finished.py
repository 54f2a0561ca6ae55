"""A run that has nothing left to do: its summary written from its rows, and a finished
group answered without asking any service (a service down is no reason to fail it)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import cast

from ._io import atomic_write_text
from .bench.dataset import Case
from .bench.results import order_and_read_for_summary, read_rows
from .costs.pricing import Pricing
from .engine.options import RunOptions
from .engine.resume import finished_note
from .engine.runconfig import RunConfig
from .engine.rundir import Run
from .engine.state import RunState
from .errors import RunLockedError
from .scores.summary import Summary, summarize
from .scores.summary_file import write_summary
from .views.report_file import write_report

Prepared = tuple[Run, RunConfig, dict[str, Case]]


@dataclass
class RunResult:
    run: Run
    summary: Summary | None
    complete: bool
    error: str | None = None  # why this run was set aside (in a group of several)
    note: str | None = None  # a --no-wait tick that had nothing to do, and why


def write_run_summary(run: Run, config: RunConfig) -> Summary | None:
    """Summarise a run's rows as the reference would, into its private summary file."""
    if not run.results_path.exists():
        return None
    if config.grading.per_item:  # HealthBench: simple-evals' summary (numpy: imported here)
        from .bench import healthbench_meta
        from .scores import healthbench_meta_scores, healthbench_scores

        meta = config.protocol_version == healthbench_meta.PROTOCOL_VERSION
        run_summary = (healthbench_meta_scores if meta else healthbench_scores).run_summary

        head = {
            "protocol_version": config.protocol_version,
            "answer_model": config.answer_model,
            "judge_model": config.judge_model,
            "dataset_sha256": config.dataset_sha256,
        }
        found = run_summary(read_rows(run.results_path), config.case_ids, head)
        atomic_write_text(run.summary_path, json.dumps(found, indent=2) + "\n", mode=0o600)
        return cast(Summary, found)
    rows = order_and_read_for_summary(run.results_path, config.case_ids)
    summary = summarize(
        rows, expected_case_ids=config.case_ids, dataset_sha256=config.dataset_sha256
    )
    write_summary(run.summary_path, summary, mode=0o600)
    return summary


def finished_tick(prepared: list[Prepared], pricing: Pricing) -> list[RunResult] | None:
    """A --no-wait tick of a finished group no process advances: a note per run, no
    service asked (a summary a killed tick never wrote, written); else None."""
    states = [run.state(c.case_ids) if run.exists() else None for run, c, _ in prepared]
    pairs = list(zip(states, prepared))
    if not all(s is not None and s.finished(c.judge_passes) for s, (_, c, _) in pairs):
        return None
    if any(busy(run) for run, _, _ in prepared):
        return None
    for (run, config, _), state in zip(prepared, states):
        if state is not None and not run.summary_path.is_file():
            repair_summary(run, config, state, pricing)
    return [
        RunResult(run, None, True, note=finished_note(run, config, state))
        for (run, config, _), state in zip(prepared, states)
        if state is not None
    ]


def settled(group: list[RunOptions], prepared: list[Prepared]) -> bool:
    """Whether every run of a plain invocation has finished with nothing it would redo or
    buy: then its model look-ups are not asked for (a service down is no reason to fail
    a finished run's command); it still writes its summary, noise and report."""
    for options, (run, config, _) in zip(group, prepared):
        state = run.state(config.case_ids) if run.exists() else None
        if state is None or not state.finished(config.judge_passes) or _redoes(options, state):
            return False
    return True


def _redoes(options: RunOptions, state: RunState) -> bool:
    """Whether a plain invocation has work in a finished run: a failed case (it redoes
    one, or says why not), a cancel taken up again, a bill to settle."""
    if options.settle_owed or (options.resume_cancelled and state.cancelled):
        return True
    return any(c.final == "error" for c in state.cases.values())


def repair_summary(run: Run, config: RunConfig, state: RunState, pricing: Pricing) -> None:
    """A finished run's missing summary (a tick killed after its last line): written from
    its rows, under its lock — no service is asked."""
    with contextlib.suppress(RunLockedError), run.lock():
        write_run_summary(run, config)
        write_report(run, state, config, pricing)


def busy(run: Run) -> bool:
    """Whether another process is advancing the run (it may be redoing its errors)."""
    try:
        with run.lock():
            return False
    except RunLockedError:
        return True

"""A run that has nothing left to do: its summary written from its rows, and a finished
group answered without asking any service (a service down is no reason to fail it)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from .bench.dataset import Case
from .bench.results import order_and_read_for_summary
from .costs.pricing import Pricing
from .engine.options import RunOptions
from .engine.resume import finished_note
from .engine.runconfig import RunConfig
from .engine.rundir import Run
from .engine.state import RunState
from .errors import RunLockedError
from .scores.summary import Summary, summarize
from .scores.summary_file import read_summary, write_summary
from .views.status import write_report

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
    rows = order_and_read_for_summary(run.results_path, config.case_ids)
    summary = summarize(
        rows, expected_case_ids=config.case_ids, dataset_sha256=config.dataset_sha256
    )
    write_summary(run.summary_path, summary, mode=0o600)
    return summary


def finished_group(
    group: list[RunOptions], prepared: list[Prepared], pricing: Pricing
) -> list[RunResult] | None:
    """A group whose runs have all finished, no process advancing them, and nothing this
    invocation would redo: its summaries (a summary a killed tick never wrote, written)
    and no service asked — a service down is no reason to fail a finished run. A
    --no-wait tick says a note per run; a plain run shows its summary. Else None."""
    states = [run.state(c.case_ids) if run.exists() else None for run, c, _ in prepared]
    for options, state, (_, config, _) in zip(group, states, prepared):
        if state is None or not state.finished(config.judge_passes):
            return None
        if not options.no_wait and _redoes(options, state):
            return None
    if any(busy(run) for run, _, _ in prepared):
        return None
    results = []
    for options, (run, config, _), state in zip(group, prepared, states):
        assert state is not None
        if not run.summary_path.is_file():
            repair_summary(run, config, state, pricing)
        if options.no_wait or not run.summary_path.is_file():
            results.append(RunResult(run, None, True, note=finished_note(run, config, state)))
        else:
            results.append(RunResult(run, read_summary(run.summary_path), True))
    return results


def _redoes(options: RunOptions, state: RunState) -> bool:
    """Whether a plain invocation has work in a finished run: failed cases it redoes (a
    call of unknown outcome only with --resend-unknown), a cancel taken up again, a bill
    to settle."""
    if options.settle_owed or (options.resume_cancelled and state.cancelled):
        return True
    cases = state.cases.values()
    return any(c.final == "error" and (options.resend_unknown or not c.unknown) for c in cases)


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

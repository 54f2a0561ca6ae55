"""What a run command prints when its work is done: the dry run's plan, or where each
run stands (summary, failures by cause, cost, or what to do next) and its exit status."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import typer

from ..engine.rundir import Run
from ..storage import shown
from .common import strict_json


def print_dry_run(group: list[Any], as_json: bool) -> None:

    from ..engine.dryrun import grand_total, plan_text
    from ..launch import dry_run as make_dry_run

    plans = [make_dry_run(o) for o in group]
    if as_json:
        typer.echo(strict_json(plans[0] if len(plans) == 1 else plans))
        return
    typer.echo("\n\n".join(plan_text(p) for p in plans))
    if len(plans) > 1:
        typer.echo("\n" + grand_total(plans))


def finish_run(
    run: Run,
    summary: Any,
    complete: bool,
    *,
    temporary: bool = False,
    error: str | None = None,
    note: str | None = None,
    now: float | None = None,
    cost_note: str | None = None,
    pricing: Path | None = None,
) -> int:
    """Print where the run stands after this invocation's work; its exit status
    (``pricing``: the price file the command was given, for its cost lines)."""
    from ..bench.causes import errors_line
    from ..costs.pricing import load_pricing
    from ..costs.rollup import cost_line
    from ..scores.noise import noise_text
    from ..scores.summary_file import summary_table
    from ..views.status import flex_text, run_status, status_text

    if note is not None:  # a cron tick with nothing to do: one line, nothing is wrong
        typer.echo(note)
        return 0
    if error is not None and not run.exists():
        typer.echo(f"{run.name}: not started ({error})")
        return 1
    status = run_status(run, load_pricing(pricing), now=now)
    if summary is not None and complete:
        typer.echo(summary_table(summary))
        if status["errors_by_cause"]:
            typer.echo(errors_line(status["errors_by_cause"]))
        typer.echo(cost_line(status["cost"]))
        if "flex" in status:
            typer.echo(flex_text(status["flex"]))
        if "judge_noise" in status:  # --judge-passes K > 1: what the extra passes measured
            typer.echo(noise_text(status["judge_noise"]))
        if "judge_noise_problem" in status:
            typer.echo(f"judge noise not shown: {status['judge_noise_problem']}")
        if cost_note is not None:
            typer.echo(cost_note)
    else:
        typer.echo(status_text(status, now))
    if error is not None:
        typer.echo(f"{run.name}: stopped: {error}")
    if temporary:
        typer.echo("(the demo ran in a temporary folder, now deleted; --jobs-dir DIR keeps it)")
    elif run.results_path.exists():
        typer.echo(f"results: {shown(run.results_path)}")
    else:  # a tick before any case has its row
        typer.echo(f"results: none yet (they go to {shown(run.results_path)})")
    if error is not None:
        return 1
    if not complete:
        see = f"see `batchbench status {run.name}`"
        if status["status"] == "cancelled":
            typer.echo(f"cancelled: `run … --resume-cancelled` takes it up again; {see}")
        elif status["status"] == "cancel pending":
            typer.echo(f"cancel pending: run `batchbench cancel {run.name}` again; {see}")
        else:
            typer.echo(f"in progress: advance it again with the same command, or {see}")
        return 3
    return 1 if status["cases"]["errors"] or summary is None else 0


def run_group(
    group: list[Any],
    clock: Any,
    *,
    kept: bool = True,
    cost_note: Callable[[Run], str | None] | None = None,
    pricing: Path | None = None,
) -> NoReturn:
    """Advance the runs lined up (with a progress line), say how each ended, show them
    side by side, and exit with the group's status (3 before 1 before 0). ``kept``: the
    runs stay (not a temporary folder, said once); ``cost_note``: each run's cost said."""
    from ..launch import execute_group
    from ..views.progress import Progress

    with Progress(clock=clock, runs=len(group)) as progress:
        results = execute_group(group, say=typer.echo, warn=progress.warn, on_progress=progress)
    codes = [
        finish_run(
            r.run,
            r.summary,
            r.complete,
            error=r.error,
            note=r.note,
            temporary=not kept and r is results[-1],  # said once
            now=clock.time(),
            cost_note=cost_note(r.run) if cost_note is not None else None,
            pricing=pricing,
        )
        for r in results
    ]
    print_leaderboard([r.run for r in results], kept=kept)
    raise typer.Exit(3 if 3 in codes else max(codes))


def print_leaderboard(runs: list[Run], kept: bool = True) -> None:
    """After a command that advanced several runs: them side by side, best first
    (``kept``: the runs stay, so `compare` can be pointed at them)."""
    from ..costs.pricing import load_pricing
    from ..views.listing import leaderboard_text

    started = [r for r in runs if r.exists()]
    if len(started) > 1:
        typer.echo("\n" + leaderboard_text(started, load_pricing(), hint=kept))

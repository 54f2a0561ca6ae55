"""The commands that watch and stop runs: status, list, cancel."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..storage import shown
from .common import JobsDirOpt, RunArg, RunsArg, clock_of, friendly, strict_json, warn
from .folders import complete_runs, jobs_folder, jobs_origin
from .project import current_project


@friendly
def status(
    ctx: typer.Context,
    names: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[RUN]...",
            help="Run names (default: every run).",
            autocompletion=complete_runs,
        ),
    ] = None,
    jobs_dir: JobsDirOpt = Path("jobs"),
    as_json: Annotated[bool, typer.Option("--json", metavar="", help="Print JSON.")] = False,
    pricing: Annotated[
        Path | None,
        typer.Option(help="Pricing JSON for the cost lines (default built-in).", metavar="FILE"),
    ] = None,
    refresh: Annotated[
        bool,
        typer.Option(
            "--refresh",
            help="Ask the API for the live state of every batch (one list call); journaled"
            " when no process is advancing the run.",
            metavar="",
        ),
    ] = False,
    base_url: Annotated[
        str | None,
        typer.Option(help="OpenAI's base URL, with --refresh (default: the run's).", metavar="URL"),
    ] = None,
) -> None:
    """Show a run's progress, token usage and cost from its journal (no API call unless
    --refresh), and how old that information is.

    Examples: batchbench status gpt-5.4-mini; batchbench status gpt-5.4-mini --refresh
    """

    from ..costs.pricing import load_pricing
    from ..engine.rundir import existing_run, list_runs
    from ..errors import ConfigError
    from ..views.status import run_status, status_text

    runs = [existing_run(jobs_dir, name) for name in names] if names else list_runs(jobs_dir)
    if refresh:
        if not names:
            raise ConfigError("--refresh asks the API about the runs you name: name them")
        from ..engine.control import refresh_status  # the SDKs only when the API is asked

        for run in runs:
            lines, journaled = refresh_status(
                jobs_dir, run.name, base_url, warn=warn, clock=clock_of(ctx)
            )
            for line in lines or ["no batch in flight"]:
                typer.echo(f"live: {run.name}: {line}")
            if lines and not journaled:
                typer.echo(f"({run.name} is being advanced by another process; it journals this)")
    prices = load_pricing(pricing)
    now = clock_of(ctx).time()
    statuses = [run_status(r, prices, now=now) for r in runs]
    read = current_project()
    if as_json:
        for one_status in statuses:  # where the defaults of this command came from
            one_status["project_file"] = str(read.path) if read else None
        one = names is not None and len(names) == 1
        typer.echo(strict_json(statuses[0] if one else statuses))
        return
    if read is not None:
        typer.echo(f"({read.said()})")
    if not statuses:
        typer.echo(f"no runs in {shown(jobs_dir)}")
    else:
        from ..scores.judge_rankings import panel_lines

        for run, one_status in zip(runs, statuses):
            typer.echo("\n".join([status_text(one_status, now), *panel_lines(run)]))


@friendly
def list_command(
    jobs_dir: JobsDirOpt = Path("jobs"),
    as_json: Annotated[bool, typer.Option("--json", metavar="", help="Print JSON.")] = False,
) -> None:
    """List the runs in the jobs folder: models, dataset, state, cases, mean and cost.

    Example: batchbench list --jobs-dir ~/bedside-runs --json
    """

    from ..costs.pricing import load_pricing
    from ..engine.rundir import list_runs
    from ..views.listing import for_json, listing_table, run_listing

    pricing = load_pricing(None)
    listing = [run_listing(r, pricing) for r in list_runs(jobs_dir)]
    origin = jobs_origin()
    chosen = f" (the jobs folder {origin} names)" if origin else ""
    if as_json:
        typer.echo(strict_json([for_json(r) for r in listing]))
    elif not listing:
        typer.echo(f"no runs in {shown(jobs_dir)}{chosen}")
    else:
        if chosen:  # the folder the user did not type: where, and who chose it
            typer.echo(f"runs in {shown(jobs_dir)}{chosen}")
        typer.echo(listing_table(listing))


@friendly
def cancel(
    ctx: typer.Context,
    names: RunsArg,
    jobs_dir: JobsDirOpt = Path("jobs"),
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI's base URL (default: the run's).", metavar="URL")
    ] = None,
) -> None:
    """Cancel a run's in-flight batches and submit nothing more (until `run … --resume-cancelled`);
    works while another process is advancing the run.

    Example: batchbench cancel gpt-5.4-mini
    """
    from ..engine.control import cancel_run
    from ..errors import BatchbenchError

    failed: BatchbenchError | None = None
    for name in names:  # one run that cannot be cancelled does not spare the others
        try:
            cancelled = cancel_run(jobs_dir, name, base_url, warn=warn, clock=clock_of(ctx))
        except BatchbenchError as exc:
            if len(names) == 1:
                raise
            typer.echo(f"error: {name}: {exc}", err=True)
            failed = exc
            continue
        told = f"{len(cancelled)} batch(es): {' '.join(cancelled)}" if cancelled else "(no batch"
        typer.echo(
            f"{name}: cancelled {told}{' was in flight)' if not cancelled else ''}; nothing"
            " more is submitted (`run … --resume-cancelled` takes it up again)"
        )
    if failed is not None:
        raise typer.Exit(failed.exit_code)


@friendly
def remove(
    names: RunsArg,
    jobs_dir: JobsDirOpt = Path("jobs"),
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            metavar="",
            help="Remove a run with batches in flight too (they run on, and are billed).",
        ),
    ] = False,
) -> None:
    """Delete runs from the jobs folder: a refused or finished attempt, a rehearsal.
    A run with batches in flight is refused (cancel it first).

    Example: batchbench remove gpt-5.4-mini-smoke --jobs-dir ~/bedside-runs
    """
    from ..engine.control import remove_run

    for name in names:  # a judge panel named whole is removed whole, in any order
        typer.echo(remove_run(jobs_dir, name, force=force, along=names))


@friendly
def move(
    name: RunArg,
    to: Annotated[
        Path,
        typer.Option(
            "--to",
            metavar="DIR_OR_URI",
            parser=jobs_folder,
            help="The jobs folder the run moves to: a bucket (s3://…, gs://…, az://…) or a"
            " local folder.",
        ),
    ],
    jobs_dir: JobsDirOpt = Path("jobs"),
) -> None:
    """Move a run to another jobs folder: a local run into the team's bucket, or back.
    The run lives in one place at a time; where it was, a note says where it went.

    Example: batchbench move gpt-5.4-mini --jobs-dir jobs --to s3://team-evals/bedside
    """
    from ..engine.control import move_run

    typer.echo(move_run(jobs_dir, name, to))

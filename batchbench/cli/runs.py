"""The commands that start, watch and stop runs: demo, run, status, list, cancel."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer

from ..progress import Progress
from ..rundir import Run, default_name
from .common import SAMPLE_DATASET, DatasetOpt, JobsDirOpt, LimitOpt, SmokeOpt, friendly


@friendly
def demo(
    jobs_dir: Annotated[
        Path | None, typer.Option(help="Keep the demo run here (default: a temporary folder).")
    ] = None,
    dataset: DatasetOpt = SAMPLE_DATASET,
) -> None:
    """Run the bundled sample end to end against the in-process emulator.

    Example: batchbench demo --jobs-dir /tmp/demo-run
    """
    import tempfile

    from ..emulator import Emulator
    from ..jobs import RunOptions, execute
    from ..pipeline import Settings

    with tempfile.TemporaryDirectory() as tmp, Emulator(latency=0.3) as emu:
        typer.echo(f"emulator on {emu.base_url}; simulated models sim-answer and sim-judge")
        options = RunOptions(
            answer_model="sim-answer",
            judge_model="sim-judge",
            run="demo",
            jobs_dir=jobs_dir or Path(tmp),
            dataset=dataset,
            base_url=emu.base_url,
            credentials={"openai": "demo-key-not-secret"},
            settings=Settings(max_requests_per_batch=5, poll_interval=0.2),
        )
        if jobs_dir is None:
            typer.echo("(the run lives in a temporary folder; pass --jobs-dir to keep it)")
        code = _finish_run(
            *execute(options, say=typer.echo, warn=_warn, on_progress=Progress()),
            temporary=jobs_dir is None,
        )
        raise typer.Exit(code)


@friendly
def run(
    answer_model: Annotated[
        list[str],
        typer.Option(help="The model under test; repeat it to grade several in one go."),
    ],
    judge_model: Annotated[str, typer.Option(help="The judge model.")],
    run_name: Annotated[
        str | None,
        typer.Option(
            "--run",
            help="Run name [A-Za-z0-9._-]+ (default: from the answer model); with several"
            " models, a prefix.",
        ),
    ] = None,
    jobs_dir: JobsDirOpt = Path("jobs"),
    dataset: Annotated[
        Path | None,
        typer.Option(
            "--dataset",
            envvar="BATCHBENCH_DATASET",
            help="BedsideBench checkout (registry.json at its root); required.",
        ),
    ] = None,
    smoke: SmokeOpt = False,
    limit: LimitOpt = None,
    benchmark: Annotated[
        list[str] | None, typer.Option("--benchmark", help="Only this benchmark (repeatable).")
    ] = None,
    reasoning_effort: Annotated[
        str | None, typer.Option(help="reasoning_effort for the answer model (max → xhigh).")
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            help="OpenAI's base URL, for judges and OpenAI answer models (default: the run's,"
            " else OPENAI_BASE_URL or OpenAI's)."
        ),
    ] = None,
    move_service: Annotated[
        bool,
        typer.Option(
            "--move-service",
            help="Resume a run against the base URL given although its batches were made at"
            " another (a proxy in front of the same service, say).",
        ),
    ] = False,
    poll_interval: Annotated[float, typer.Option(help="Seconds between status polls.")] = 30.0,
    max_requests_per_batch: Annotated[
        int, typer.Option(help="Cap on requests per batch file (the API allows 50,000).")
    ] = 50_000,
    max_attempts: Annotated[
        int, typer.Option(help="Judge attempts per answer before an invalid reply is an error.")
    ] = 3,
    max_retries: Annotated[
        int,
        typer.Option(
            help="Attempts per request for 408/409/429/5xx replies, empty messages, expired"
            " lines and temperature refusals (the reference's --max-retries)."
        ),
    ] = 6,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="Submit and collect what is ready, then exit.")
    ] = False,
    token_limit_wait: Annotated[
        float,
        typer.Option(help="Seconds to wait after a batch fails with token_limit_exceeded."),
    ] = 60.0,
    max_enqueued_tokens: Annotated[
        int | None,
        typer.Option(help="Keep each model's estimated prompt tokens in flight under N."),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Build and check every file, estimate tokens and cost; no API call."
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="With --dry-run: print JSON.")] = False,
    pricing: Annotated[
        Path | None, typer.Option(help="Pricing JSON (the built-in table's layout).")
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option(help="Refuse to submit when the estimated batch cost exceeds USD."),
    ] = None,
    assumed_answer_tokens: Annotated[
        int, typer.Option(help="Answer length assumed when estimating the judge stage.")
    ] = 800,
    delete_remote_files: Annotated[
        bool,
        typer.Option(
            "--delete-remote-files",
            help="Delete each batch's input and result files on the server once"
            " they are collected (the run folder keeps them).",
        ),
    ] = False,
) -> None:
    """Start or resume a run: submit, poll, judge, collect and score, surviving restarts.

    Exit status: 0 when every selected case is scored, 1 when some case ended in
    an error, 3 when --no-wait leaves the run still in progress.

    Example: batchbench run --answer-model gpt-5.4-mini --judge-model gpt-5.6-sol
    --dataset ../bedside-bench --smoke
    """
    from ..errors import ConfigError
    from ..jobs import RunOptions, execute_group
    from ..pipeline import Settings

    if dataset is None:
        raise ConfigError(
            "run needs --dataset DIR (or BATCHBENCH_DATASET): a BedsideBench checkout;"
            " `batchbench demo` runs the bundled sample"
        )
    if as_json and not dry_run:
        raise ConfigError("--json goes with --dry-run (use `batchbench status --json`)")
    options = RunOptions(
        answer_model=answer_model[0],
        judge_model=judge_model,
        run=run_name,
        jobs_dir=jobs_dir,
        dataset=dataset,
        smoke=smoke,
        limit=limit,
        benchmarks=tuple(benchmark or ()),
        reasoning_effort=reasoning_effort,
        base_url=base_url,
        move_service=move_service,
        no_wait=no_wait,
        pricing=pricing,
        max_cost=max_cost,
        assumed_answer_tokens=assumed_answer_tokens,
        settings=Settings(
            max_requests_per_batch=max_requests_per_batch,
            max_attempts=max_attempts,
            max_retries=max_retries,
            poll_interval=poll_interval,
            hold_seconds=token_limit_wait,
            max_enqueued_tokens=max_enqueued_tokens,
            delete_remote_files=delete_remote_files,
        ),
    ).check()
    group = [
        dataclasses.replace(
            options,
            answer_model=model,
            run=run_name
            if len(answer_model) == 1
            else f"{run_name}-{default_name(model, smoke)}"
            if run_name
            else None,
        ).check()
        for model in dict.fromkeys(answer_model)
    ]
    if dry_run:
        import json

        from ..dryrun import plan_text
        from ..jobs import dry_run as make_dry_run

        plans = [make_dry_run(o) for o in group]
        if as_json:
            typer.echo(json.dumps(plans[0] if len(plans) == 1 else plans, indent=2))
        else:
            typer.echo("\n\n".join(plan_text(p) for p in plans))
        return
    results = execute_group(group, say=typer.echo, warn=_warn, on_progress=Progress())
    codes = [_finish_run(r.run, r.summary, r.complete, error=r.error) for r in results]
    raise typer.Exit(3 if 3 in codes else max(codes))


def _warn(line: str) -> None:
    typer.echo(line, err=True)


def _finish_run(
    run: Run, summary: Any, complete: bool, *, temporary: bool = False, error: str | None = None
) -> int:
    """Print where the run stands after this invocation's work; its exit status."""
    from ..status import errors_line, run_status, status_text
    from ..summary_io import summary_table

    if error is not None and not run.exists():
        typer.echo(f"{run.name}: not started ({error})")
        return 1
    status = run_status(run)
    if summary is not None and complete:
        typer.echo(summary_table(summary))
        if status["errors_by_cause"]:
            typer.echo(errors_line(status["errors_by_cause"]))
    else:
        typer.echo(status_text(status))
    if error is not None:
        typer.echo(f"{run.name}: stopped: {error}")
    if temporary:
        typer.echo("(the demo ran in a temporary folder, now deleted; --jobs-dir DIR keeps it)")
    else:
        typer.echo(f"results: {run.results_path.resolve()}")
    if error is not None:
        return 1
    if not complete:
        what = "cancelled" if status["status"] == "cancelled" else "in progress"
        typer.echo(
            f"{what}: advance it again with the same command, or see `batchbench status {run.name}`"
        )
        return 3
    return 1 if status["cases"]["errors"] or summary is None else 0


@friendly
def status(
    names: Annotated[
        list[str] | None,
        typer.Argument(metavar="[RUN]...", help="Run names (default: every run)."),
    ] = None,
    jobs_dir: JobsDirOpt = Path("jobs"),
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    pricing: Annotated[
        Path | None, typer.Option(help="Pricing JSON for the cost lines (default built-in).")
    ] = None,
    refresh: Annotated[
        bool,
        typer.Option(
            "--refresh",
            help="Ask the API for the live state of every batch (one list call); journaled"
            " when no process is advancing the run.",
        ),
    ] = False,
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI's base URL, with --refresh (default: the run's).")
    ] = None,
) -> None:
    """Show a run's progress, token usage and cost from its journal (no API call unless
    --refresh), and how old that information is.

    Examples: batchbench status gpt-5.4-mini; batchbench status gpt-5.4-mini --refresh
    """
    import json

    from ..costs import load_pricing
    from ..errors import ConfigError
    from ..rundir import list_runs, open_run
    from ..status import run_status, status_text

    runs = [open_run(jobs_dir, name) for name in names] if names else list_runs(jobs_dir)
    for run in runs:
        if not run.exists():
            raise ConfigError(f"no run {run.name!r} in {jobs_dir.resolve()}")
    if refresh:
        if not names:
            raise ConfigError("--refresh asks the API about the runs you name: name them")
        from ..control import refresh_status  # the SDKs only when the API is asked

        for run in runs:
            lines, journaled = refresh_status(jobs_dir, run.name, base_url, warn=_warn)
            for line in lines or ["no batch in flight"]:
                typer.echo(f"live: {run.name}: {line}")
            if lines and not journaled:
                typer.echo(f"({run.name} is being advanced by another process; it journals this)")
    prices = load_pricing(pricing)
    statuses = [run_status(r, prices) for r in runs]
    if as_json:
        one = names is not None and len(names) == 1
        typer.echo(json.dumps(statuses[0] if one else statuses, indent=2))
    elif not statuses:
        typer.echo(f"no runs in {jobs_dir.resolve()}")
    else:
        typer.echo("\n".join(status_text(s) for s in statuses))


@friendly
def list_command(
    jobs_dir: JobsDirOpt = Path("jobs"),
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the runs in the jobs folder: models, dataset, state, cases, mean and cost.

    Example: batchbench list --jobs-dir ~/bedside-runs --json
    """
    import json

    from ..costs import load_pricing
    from ..rundir import list_runs
    from ..status import run_listing

    listing = [run_listing(r, load_pricing(None)) for r in list_runs(jobs_dir)]
    if as_json:
        typer.echo(json.dumps(listing, indent=2))
        return
    if not listing:
        typer.echo(f"no runs in {jobs_dir.resolve()}")
    for r in listing:
        mean = "-" if r["overall_macro_mean"] is None else f"{r['overall_macro_mean']:.3f}"
        cost = "-" if r["cost_usd"] is None else f"${r['cost_usd']:,.2f}"
        typer.echo(
            f"{r['run']}\t{r['status']}\t{r['scored']}/{r['failed']}/{r['total']}"
            f"\t{r['answer_model']}\t{r['judge_model']}\t{r['dataset']}\tmean {mean}\t{cost}"
        )


@friendly
def cancel(
    names: Annotated[list[str], typer.Argument(metavar="RUN...", help="Run names.")],
    jobs_dir: JobsDirOpt = Path("jobs"),
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI's base URL (default: the run's).")
    ] = None,
) -> None:
    """Cancel a run's in-flight batches and submit nothing more (until `run` resumes it);
    works while another process is advancing the run.

    Example: batchbench cancel gpt-5.4-mini
    """
    from ..control import cancel_run

    for name in names:
        cancelled = cancel_run(jobs_dir, name, base_url, warn=_warn)
        typer.echo(f"{name}: cancelled {len(cancelled)} batch(es): {' '.join(cancelled) or '-'}")

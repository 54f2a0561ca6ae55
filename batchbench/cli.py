"""The command line: parse options, call the package, print. Nothing else lives here."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from .emulator.command import emulator_command
from .errors import BatchbenchError, InvariantError, StorageError
from .report import Progress

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Run BedsideBench through the OpenAI Batch API, scored exactly like the reference.",
)

F = TypeVar("F", bound=Callable[..., Any])

# The bundled sample ships inside the package, so a wheel install can run the demo.
SAMPLE_DATASET = Path(str(resources.files("batchbench").joinpath("sample")))


def friendly(fn: F) -> F:
    """Turn a BatchbenchError into one line on stderr and a non-zero exit."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BatchbenchError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(exc.exit_code) from None
        except OSError as exc:  # file work no module turned into a StorageError
            typer.echo(f"error: {exc.filename or 'a file'}: {exc.strerror or exc}", err=True)
            raise typer.Exit(StorageError.exit_code) from None
        except InvariantError as exc:
            typer.echo(f"internal error (a bug in batchbench, please report it): {exc}", err=True)
            raise typer.Exit(InvariantError.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("interrupted: nothing is lost; run the same command to resume", err=True)
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


@app.callback()
def root() -> None:
    """Run BedsideBench through the OpenAI Batch API, scored exactly like the reference."""


DatasetOpt = Annotated[
    Path, typer.Option("--dataset", help="BedsideBench checkout (registry.json at its root).")
]
SmokeOpt = Annotated[bool, typer.Option("--smoke", help="Only the first case of each benchmark.")]
LimitOpt = Annotated[
    int | None, typer.Option("--limit", help="Keep the first N cases of the selection.")
]


@app.command()
@friendly
def summarize(
    results: Annotated[Path, typer.Argument(help="A reference-format results JSONL file.")],
    dataset: Annotated[
        Path | None,
        typer.Option(
            "--dataset",
            help="BedsideBench checkout: its digest and selection define the expected cases."
            " Without it every case in RESULTS counts and the digest is null.",
        ),
    ] = None,
    smoke: SmokeOpt = False,
    limit: LimitOpt = None,
    benchmark: Annotated[
        list[str] | None, typer.Option("--benchmark", help="Only this benchmark (repeatable).")
    ] = None,
    bootstrap_samples: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 10000,
    bootstrap_seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 42,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary JSON.")] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Write the summary here (default: RESULTS.summary.json)."
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace a summary of another dataset or selection."),
    ] = False,
) -> None:
    """Write RESULTS.summary.json exactly as the reference runner would, and print it.

    Rows that cannot be true (a score outside 0..1, another benchmark, decisions
    that score otherwise) are refused, and so is replacing another selection's summary.
    """
    from .jobs import summarize_results
    from .report import summary_json, summary_table

    summary, out, notes = summarize_results(
        results,
        dataset,
        smoke=smoke,
        limit=limit,
        benchmarks=tuple(benchmark or ()),
        samples=bootstrap_samples,
        seed=bootstrap_seed,
        output=output,
        force=force,
    )
    for note in notes:
        typer.echo(note, err=True)
    if as_json:
        sys.stdout.write(summary_json(summary))
    else:
        typer.echo(summary_table(summary))
        typer.echo(f"wrote {out}")


@app.command()
@friendly
def validate(dataset: DatasetOpt = SAMPLE_DATASET) -> None:
    """Load and validate a dataset; print its case count and digest."""
    from .dataset import load_dataset

    ds = load_dataset(dataset)
    typer.echo(f"{len(ds.cases)} cases in {len(ds.benchmarks)} benchmarks")
    typer.echo(f"dataset_sha256 {ds.sha256}")


app.command("emulator")(emulator_command)


JobsDirOpt = Annotated[
    Path, typer.Option("--jobs-dir", help="Folder holding one directory per run.")
]


@app.command()
@friendly
def run(
    answer_model: Annotated[str, typer.Option(help="The model under test.")],
    judge_model: Annotated[str, typer.Option(help="The judge model.")],
    run_name: Annotated[
        str | None,
        typer.Option("--run", help="Run name [A-Za-z0-9._-]+ (default: from the answer model)."),
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
        str | None, typer.Option(help="API base URL (default: OPENAI_BASE_URL or OpenAI's).")
    ] = None,
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
    """
    from .errors import ConfigError
    from .jobs import RunOptions, Settings, execute
    from .report import summary_table

    if dataset is None:
        raise ConfigError(
            "run needs --dataset DIR (or BATCHBENCH_DATASET): a BedsideBench checkout;"
            " `batchbench demo` runs the bundled sample"
        )
    if as_json and not dry_run:
        raise ConfigError("--json goes with --dry-run (use `batchbench status --json`)")
    options = RunOptions(
        answer_model=answer_model,
        judge_model=judge_model,
        run=run_name,
        jobs_dir=jobs_dir,
        dataset=dataset,
        smoke=smoke,
        limit=limit,
        benchmarks=tuple(benchmark or ()),
        reasoning_effort=reasoning_effort,
        base_url=base_url,
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
    if dry_run:
        import json

        from .dryrun import plan_text
        from .jobs import dry_run as make_dry_run

        plan = make_dry_run(options)
        typer.echo(json.dumps(plan, indent=2) if as_json else plan_text(plan))
        return
    _finish_run(*execute(options, say=typer.echo, on_progress=Progress(typer.echo)), summary_table)


def _finish_run(run_dir: Any, summary: Any, complete: bool, summary_table: Any) -> None:
    if summary is not None and complete:
        typer.echo(summary_table(summary))
    typer.echo(f"results: {run_dir.results_path}")
    if not complete:
        typer.echo(
            f"in progress: advance it again with the same command, or see"
            f" `batchbench status {run_dir.name}`"
        )
        raise typer.Exit(3)
    if (
        summary is None
        or summary["errors"]
        or summary["completed_cases"] < len(run_dir.load_config().case_ids)
    ):
        raise typer.Exit(1)


@app.command()
@friendly
def status(
    name: Annotated[str | None, typer.Argument(help="Run name (default: every run).")] = None,
    jobs_dir: JobsDirOpt = Path("jobs"),
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    pricing: Annotated[
        Path | None, typer.Option(help="Pricing JSON for the cost lines (default built-in).")
    ] = None,
) -> None:
    """Show a run's progress, token usage and cost from its journal (read-only, no API call)."""
    import json

    from .costs import load_pricing
    from .errors import ConfigError
    from .report import run_status, status_text
    from .rundir import list_runs, open_run

    runs = [open_run(jobs_dir, name)] if name else list_runs(jobs_dir)
    if name and not runs[0].exists():
        raise ConfigError(f"no run {name!r} in {jobs_dir}")
    prices = load_pricing(pricing)
    statuses = [run_status(r, prices) for r in runs]
    if as_json:
        typer.echo(json.dumps(statuses[0] if name else statuses, indent=2))
    elif not statuses:
        typer.echo(f"no runs in {jobs_dir}")
    else:
        typer.echo("\n".join(status_text(s) for s in statuses))


@app.command("list")
@friendly
def list_command(jobs_dir: JobsDirOpt = Path("jobs")) -> None:
    """List the runs in the jobs directory."""
    from .report import run_status
    from .rundir import list_runs

    runs = list_runs(jobs_dir)
    if not runs:
        typer.echo(f"no runs in {jobs_dir}")
    for r in runs:
        s = run_status(r)
        c = s["cases"]
        typer.echo(
            f"{s['run']}\t{s['status']}\t{c['scored']}/{c['total']} scored"
            f"\t{s['answer_model']}\t{s['judge_model']}"
        )


@app.command()
@friendly
def cancel(
    name: Annotated[str, typer.Argument(help="Run name.")],
    jobs_dir: JobsDirOpt = Path("jobs"),
    base_url: Annotated[str | None, typer.Option(help="API base URL.")] = None,
) -> None:
    """Cancel a run's in-flight batches and submit nothing more (until `run` resumes it)."""
    from .jobs import cancel_run

    cancelled = cancel_run(jobs_dir, name, base_url)
    typer.echo(f"cancelled {len(cancelled)} batch(es): {' '.join(cancelled) or '-'}")


@app.command()
@friendly
def demo(
    jobs_dir: Annotated[
        Path | None, typer.Option(help="Keep the demo run here (default: a temporary folder).")
    ] = None,
    dataset: DatasetOpt = SAMPLE_DATASET,
) -> None:
    """Run the bundled sample end to end against the in-process emulator."""
    import tempfile

    from .emulator import Emulator
    from .jobs import RunOptions, Settings, execute
    from .report import summary_table

    with tempfile.TemporaryDirectory() as tmp, Emulator(latency=0.3) as emu:
        typer.echo(f"emulator on {emu.base_url}; simulated models sim-answer and sim-judge")
        options = RunOptions(
            answer_model="sim-answer",
            judge_model="sim-judge",
            run="demo",
            jobs_dir=jobs_dir or Path(tmp),
            dataset=dataset,
            base_url=emu.base_url,
            api_key="demo-key-not-secret",
            settings=Settings(max_requests_per_batch=5, poll_interval=0.2),
        )
        if jobs_dir is None:
            typer.echo("(the run lives in a temporary folder; pass --jobs-dir to keep it)")
        _finish_run(
            *execute(options, say=typer.echo, on_progress=Progress(typer.echo)),
            summary_table,
        )


def main() -> None:
    app()


__all__ = ["app", "main"]

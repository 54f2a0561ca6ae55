"""The command that starts runs: ``run`` (and its dry run)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from ..engine.runconfig import default_name
from ..providers.registry import provider_labels
from .common import clock_of, friendly
from .finish import finish_run, print_dry_run

SELECTION, MODELS, API, BUDGET, ADVANCED = "Selection", "Models", "API", "Budget", "Advanced"


@friendly
def run(
    ctx: typer.Context,
    answer_model: Annotated[
        list[str],
        typer.Option(
            metavar="MODEL",
            rich_help_panel=MODELS,
            help="The model under test; repeat it to grade several in one go (any provider:"
            f" {provider_labels()}).",
        ),
    ],
    judge_model: Annotated[
        str, typer.Option(metavar="MODEL", rich_help_panel=MODELS, help="The judge (OpenAI).")
    ],
    reasoning_effort: Annotated[
        str | None,
        typer.Option(
            metavar="EFFORT",
            rich_help_panel=MODELS,
            help="For the answer model: none, minimal, low, medium, high, xhigh or max (max is"
            " each service's highest).",
        ),
    ] = None,
    dataset: Annotated[
        Path | None,
        typer.Option(
            "--dataset",
            metavar="DIR",
            envvar="BATCHBENCH_DATASET",
            rich_help_panel=SELECTION,
            help="BedsideBench checkout (registry.json at its root); required.",
        ),
    ] = None,
    smoke: Annotated[
        bool,
        typer.Option(
            "--smoke",
            rich_help_panel=SELECTION,
            help="Only the first case of each benchmark.",
            metavar="",
        ),
    ] = False,
    limit: Annotated[
        int | None,
        typer.Option(
            metavar="N", rich_help_panel=SELECTION, help="Keep the first N cases of the selection."
        ),
    ] = None,
    benchmark: Annotated[
        list[str] | None,
        typer.Option(
            "--benchmark",
            metavar="NAME",
            rich_help_panel=SELECTION,
            help="Only this benchmark (repeatable).",
        ),
    ] = None,
    run_name: Annotated[
        str | None,
        typer.Option(
            "--run",
            metavar="NAME",
            rich_help_panel=SELECTION,
            help="Run name, letters, digits and . _ - (default: from the answer model); with"
            " several models, a prefix.",
        ),
    ] = None,
    jobs_dir: Annotated[
        Path,
        typer.Option(
            "--jobs-dir",
            metavar="DIR",
            envvar="BATCHBENCH_JOBS_DIR",
            rich_help_panel=SELECTION,
            help="Folder holding one directory per run (or BATCHBENCH_JOBS_DIR).",
        ),
    ] = Path("jobs"),
    base_url: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            rich_help_panel=API,
            help="OpenAI's base URL, for judges and OpenAI answer models (default: the run's,"
            " else OPENAI_BASE_URL or OpenAI's).",
        ),
    ] = None,
    move_service: Annotated[
        bool,
        typer.Option(
            "--move-service",
            rich_help_panel=API,
            help="Resume a run against the base URL given although its batches were made at"
            " another (a proxy in front of the same service, say).",
            metavar="",
        ),
    ] = False,
    no_wait: Annotated[
        bool,
        typer.Option(
            "--no-wait",
            rich_help_panel=API,
            help="Submit and collect what is ready, then exit (for cron).",
            metavar="",
        ),
    ] = False,
    poll_interval: Annotated[
        float,
        typer.Option(metavar="SECONDS", rich_help_panel=API, help="Time between status polls."),
    ] = 30.0,
    delete_remote_files: Annotated[
        bool,
        typer.Option(
            "--delete-remote-files",
            rich_help_panel=API,
            help="Delete each batch's input and result files on the service once they are"
            " collected (the run folder keeps them).",
            metavar="",
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            rich_help_panel=BUDGET,
            help="Build and check every file, estimate tokens and cost; no API call.",
            metavar="",
        ),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", metavar="", rich_help_panel=BUDGET, help="With --dry-run: print JSON."
        ),
    ] = False,
    max_cost: Annotated[
        float | None,
        typer.Option(
            metavar="USD",
            rich_help_panel=BUDGET,
            help="Refuse to submit when the estimated batch cost exceeds this.",
        ),
    ] = None,
    pricing: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            rich_help_panel=BUDGET,
            help="Prices (the built-in pricing.json's layout) for models it lacks.",
        ),
    ] = None,
    assumed_answer_tokens: Annotated[
        int,
        typer.Option(
            metavar="N",
            rich_help_panel=BUDGET,
            help="Answer length assumed when estimating the judge stage.",
        ),
    ] = 800,
    max_enqueued_tokens: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            rich_help_panel=BUDGET,
            help="Keep each model's estimated prompt tokens in flight under N.",
        ),
    ] = None,
    max_requests_per_batch: Annotated[
        int,
        typer.Option(
            metavar="N",
            rich_help_panel=ADVANCED,
            help="Cap on requests per batch (each service's own limit applies too).",
        ),
    ] = 50_000,
    max_retries: Annotated[
        int,
        typer.Option(
            metavar="N",
            rich_help_panel=ADVANCED,
            help="Attempts per request for 408/409/429/5xx replies, empty messages and"
            " temperature refusals (the reference's --max-retries).",
        ),
    ] = 6,
    max_attempts: Annotated[
        int,
        typer.Option(
            metavar="N",
            rich_help_panel=ADVANCED,
            help="Judge attempts per answer before an invalid reply is an error.",
        ),
    ] = 3,
    token_limit_wait: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            rich_help_panel=ADVANCED,
            help="Wait after a batch fails with token_limit_exceeded.",
        ),
    ] = 60.0,
    judge_passes: Annotated[
        int,
        typer.Option(
            metavar="K",
            rich_help_panel=MODELS,
            help="Judge requests per answer, to measure the judge's noise (judge_passes.jsonl,"
            " judge_noise.json); the rows and summary keep the first, as the reference.",
        ),
    ] = 1,
    resubmit_after: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            rich_help_panel=ADVANCED,
            help="Cancel a batch the service has not started after this long and send its"
            " requests again, once (Gemini jobs can stay PENDING for days).",
        ),
    ] = 12 * 3600.0,
    bedrock_role: Annotated[
        str | None,
        typer.Option(
            "--bedrock-role",
            metavar="ARN",
            rich_help_panel=API,
            help="The service role Bedrock jobs run as (else BEDROCK_ROLE_ARN).",
        ),
    ] = None,
    s3_uri: Annotated[
        str | None,
        typer.Option(
            "--s3-uri",
            metavar="S3_URI",
            rich_help_panel=API,
            help="Where Bedrock jobs read and write (s3://BUCKET/PREFIX; else BATCHBENCH_S3_URI).",
        ),
    ] = None,
    on_demand_remainder: Annotated[
        bool,
        typer.Option(
            "--on-demand-remainder",
            rich_help_panel=ADVANCED,
            help="Send requests too few for the service's smallest batch (Bedrock's minimum"
            " records per job: a smoke run, a retry of a few lines) on demand, each at the"
            " full price; without it the run stops and says how many remain.",
            metavar="",
        ),
    ] = False,
) -> None:
    """Start or resume a run: submit, poll, judge, collect and score, surviving restarts.

    Exit status: 0 when every selected case is scored (or, with --no-wait, when
    the run had already finished or another process is advancing it), 1 when
    some case ended in an error, 3 when --no-wait leaves the run still in progress
    or the run was cancelled.

    Example: batchbench run --answer-model gpt-5.4-mini --judge-model gpt-5.6-sol
    --dataset ../bedside-bench --smoke
    """
    from ..engine.pipeline import Settings
    from ..errors import ConfigError
    from ..launch import RunOptions, execute_group

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
        account_settings={
            variable: value
            for variable, value in (
                ("BEDROCK_ROLE_ARN", bedrock_role),
                ("BATCHBENCH_S3_URI", s3_uri),
            )
            if value
        },
        no_wait=no_wait,
        pricing=pricing,
        max_cost=max_cost,
        assumed_answer_tokens=assumed_answer_tokens,
        judge_passes=judge_passes,
        settings=Settings(
            max_requests_per_batch=max_requests_per_batch,
            max_attempts=max_attempts,
            max_retries=max_retries,
            poll_interval=poll_interval,
            hold_seconds=token_limit_wait,
            resubmit_after=resubmit_after,
            on_demand_remainder=on_demand_remainder,
            max_enqueued_tokens=max_enqueued_tokens,
            delete_remote_files=delete_remote_files,
        ),
        clock=clock_of(ctx),
    ).check()
    models = list(dict.fromkeys(answer_model))
    group = [
        dataclasses.replace(
            options, answer_model=model, run=group_run_name(run_name, model, smoke, models)
        ).check()
        for model in models
    ]
    if dry_run:
        print_dry_run(group, as_json)
        return
    from ..views.progress import Progress

    with Progress(clock=options.clock, runs=len(group)) as progress:
        results = execute_group(group, say=typer.echo, warn=progress.warn, on_progress=progress)
    codes = [
        finish_run(
            r.run, r.summary, r.complete, error=r.error, note=r.note, now=options.clock.time()
        )
        for r in results
    ]
    raise typer.Exit(3 if 3 in codes else max(codes))


def group_run_name(given: str | None, model: str, smoke: bool, models: list[str]) -> str | None:
    """One model: the name given; several: the name given as a prefix (or the default)."""
    if len(models) == 1:
        return given
    return f"{given}-{default_name(model, smoke)}" if given else None

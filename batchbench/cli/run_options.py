"""The options of ``batchbench run``, each its own annotated type, by help panel: the
command's signature then reads as what it takes, and its body as the steps it takes."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from ..engine.late import TAIL_RULE
from ..providers.registry import PROVIDERS, Flag, provider_labels
from .common import SELECTION

MODELS, API, BUDGET, ADVANCED = "Models", "API", "Budget", "Advanced"
JUDGES = " or ".join(spec.label for spec in reversed(PROVIDERS) if spec.judges)
FLEX = ", ".join(spec.label for spec in reversed(PROVIDERS) if spec.flex_tail)

# The options of `run`, by panel (each one its own type, so the command reads as
# the steps it takes).
AnswerModelOpt = Annotated[
    list[str] | None,
    typer.Option(
        metavar="MODEL",
        rich_help_panel=MODELS,
        help="The model under test (required); repeat it to grade several in one go (any"
        f" provider: {provider_labels()}).",
    ),
]

JudgeModelOpt = Annotated[
    list[str] | None,
    typer.Option(
        metavar="MODEL",
        rich_help_panel=MODELS,
        help=f"The judge (a model of any service: {JUDGES}; the reference judges on OpenAI)."
        " Repeat it for a panel: every answer judged by each, the first judge's rows the run's,"
        " each other's in a run of its own (RUN--JUDGE). Required, but for HealthBench, whose"
        " grader is simple-evals' gpt-4.1-2025-04-14 unless named.",
    ),
]

ReasoningEffortOpt = Annotated[
    str | None,
    typer.Option(
        metavar="EFFORT",
        rich_help_panel=MODELS,
        help="For the answer model: none, minimal, low, medium, high, xhigh or max (max is"
        " each service's highest).",
    ),
]

DatasetOpt = Annotated[
    Path | None,
    typer.Option(
        "--dataset",
        metavar="PATH",
        envvar="BATCHBENCH_DATASET",
        rich_help_panel=SELECTION,
        help="BedsideBench checkout (registry.json at its root) or a HealthBench JSONL;"
        " required: here, in"
        " BATCHBENCH_DATASET, or as `dataset` in the project file (batchbench.toml, or"
        " \\[tool.batchbench] in pyproject.toml, found upward).",
    ),
]

BenchmarkOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--benchmark",
        metavar="NAME",
        rich_help_panel=SELECTION,
        help="Only this benchmark (repeatable).",
    ),
]

RunNameOpt = Annotated[
    str | None,
    typer.Option(
        "--run",
        metavar="NAME",
        rich_help_panel=SELECTION,
        help="Run name, letters, digits and . _ - (default: from the answer model); with"
        " several models, a prefix.",
    ),
]

BaseUrlOpt = Annotated[
    str | None,
    typer.Option(
        metavar="URL",
        rich_help_panel=API,
        help="OpenAI's base URL, for judges and OpenAI answer models (default: the run's,"
        " else OPENAI_BASE_URL or OpenAI's).",
    ),
]

MoveServiceOpt = Annotated[
    bool,
    typer.Option(
        "--move-service",
        rich_help_panel=API,
        help="Resume a run against the base URL given although its batches were made at"
        " another (a proxy in front of the same service, say).",
        metavar="",
    ),
]

NoWaitOpt = Annotated[
    bool,
    typer.Option(
        "--no-wait",
        rich_help_panel=API,
        help="Submit and collect what is ready, then exit (for cron).",
        metavar="",
    ),
]

PollIntervalOpt = Annotated[
    float,
    typer.Option(metavar="SECONDS", rich_help_panel=API, help="Time between status polls."),
]

DeleteRemoteFilesOpt = Annotated[
    bool,
    typer.Option(
        "--delete-remote-files",
        rich_help_panel=API,
        help="Delete each batch's input and result files on the service once they are"
        " collected (the run folder keeps them).",
        metavar="",
    ),
]

CanaryOpt = Annotated[
    bool | None,
    typer.Option(
        "--canary/--no-canary",
        rich_help_panel=API,
        help="Send a few cases first and read them through to rows before buying the rest,"
        " the first time this jobs folder sends a stage to a service and model for real"
        " (default: on for a real service, off for a loopback one: the emulator).",
        show_default=False,
        metavar="",
    ),
]

AnalysisPlanOpt = Annotated[
    Path | None,
    typer.Option(
        "--plan",
        metavar="FILE",
        rich_help_panel=BUDGET,
        help="The sealed analysis plan (`plan … --seal FILE`) the run starts under: its"
        " SHA-256 and text are kept with the run, and the report checks against it.",
    ),
]

DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        rich_help_panel=BUDGET,
        help="Build and check every file, estimate tokens and cost; no API call.",
        metavar="",
    ),
]

AsJsonOpt = Annotated[
    bool,
    typer.Option("--json", metavar="", rich_help_panel=BUDGET, help="With --dry-run: print JSON."),
]

MaxRequestsPerBatchOpt = Annotated[
    int,
    typer.Option(
        metavar="N",
        rich_help_panel=ADVANCED,
        help="Cap on requests per batch (each service's own limit applies too).",
    ),
]

MaxRetriesOpt = Annotated[
    int,
    typer.Option(
        metavar="N",
        rich_help_panel=ADVANCED,
        help="Attempts per request for 408/409/429/5xx replies, empty messages and"
        " temperature refusals (the reference's --max-retries).",
    ),
]

MaxAttemptsOpt = Annotated[
    int,
    typer.Option(
        metavar="N",
        rich_help_panel=ADVANCED,
        help="Judge attempts per answer before an invalid reply is an error.",
    ),
]

TokenLimitWaitOpt = Annotated[
    float,
    typer.Option(
        metavar="SECONDS",
        rich_help_panel=ADVANCED,
        help="Wait after a batch fails with token_limit_exceeded.",
    ),
]

JudgePassesOpt = Annotated[
    int,
    typer.Option(
        metavar="K",
        rich_help_panel=MODELS,
        help="Judge requests per answer, to measure the judge's noise (judge_passes.jsonl,"
        " judge_noise.json); the rows and summary keep the first, as the reference.",
    ),
]

ResubmitAfterOpt = Annotated[
    float,
    typer.Option(
        metavar="SECONDS",
        rich_help_panel=ADVANCED,
        help="Cancel a batch the service has not started after this long and send its"
        " requests again, once (Gemini jobs can stay PENDING for days).",
    ),
]

CreateWaitOpt = Annotated[
    float | None,
    typer.Option(
        "--create-wait",
        metavar="SECONDS",
        rich_help_panel=ADVANCED,
        help="How long a batch create that got no answer (a timeout, a dropped connection,"
        " a 502 or 504, a process stopped mid-call) may still reach the service and make its"
        " batch: it is looked for meanwhile, and nothing is created again before. Default:"
        " the service's (600 s; 0 on Bedrock and Fireworks, whose creates are unique).",
    ),
]
TailFlexOpt = Annotated[
    float | None,
    typer.Option(
        "--tail-flex",
        metavar="SECONDS",
        rich_help_panel=ADVANCED,
        help="Finish a batch's last lines on the flex tier at the batch price: a batch"
        f" running longer than SECONDS with {TAIL_RULE} is cancelled, what it returned is"
        " kept, and the rest is sent one request at a time with service_tier flex"
        f" ({FLEX}; batches of other services run to their end). Off by default.",
    ),
]

ResumeCancelledOpt = Annotated[
    bool,
    typer.Option(
        "--resume-cancelled",
        rich_help_panel=ADVANCED,
        help="Take a cancelled run up again; without it a cancelled run stays cancelled"
        " (collecting what finished), whichever command or tick runs it.",
        metavar="",
    ),
]

SettleOwedOpt = Annotated[
    bool,
    typer.Option(
        "--settle-owed",
        rich_help_panel=ADVANCED,
        help="Stop waiting for the results a service says a batch has and does not give"
        " (a file short of what ran, an empty one, a named file that answers 404): keep"
        " what arrived and send only the missing requests again, once — said, with its"
        " cost at the batch price, before anything is sent.",
        metavar="",
    ),
]

ResendUnknownOpt = Annotated[
    bool,
    typer.Option(
        "--resend-unknown",
        rich_help_panel=ADVANCED,
        help="Redo the cases whose call (on flex, or on demand) was sent but never answered:"
        " it may have run and been billed, so a plain rerun leaves their error rows, and"
        " this sends them again (each may be paid twice).",
        metavar="",
    ),
]

OnDemandRemainderOpt = Annotated[
    bool,
    typer.Option(
        "--on-demand-remainder",
        rich_help_panel=ADVANCED,
        help="Send requests too few for the service's smallest batch (Bedrock's minimum"
        " records per job: a smoke run, a retry of a few lines) on demand, each at the"
        " full price; without it the run stops and says how many remain.",
        metavar="",
    ),
]


def with_account_flags(fn: Callable[..., None]) -> Callable[..., None]:
    """``fn`` with one option per account variable a provider's record names a flag for
    (``--s3-uri``, ``--gcs-uri``…), handed to it as ``account_settings`` (variable →
    value, the ones given): a new provider's settings reach ``run`` by its record."""
    flags = list({flag.option: flag for spec in PROVIDERS for flag in spec.flags}.values())
    own = inspect.signature(fn, eval_str=True)
    kept = [p for p in own.parameters.values() if p.name != "account_settings"]
    added = [
        inspect.Parameter(
            _param(flag),
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[
                str | None,  # noqa: UP007 (typer reads the annotation at run time)
                typer.Option(
                    flag.option,
                    metavar=flag.metavar,
                    rich_help_panel=API,
                    help=f"{flag.help} (else {flag.variable}).",
                ),
            ],
        )
        for flag in flags
    ]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        given = {flag.variable: kwargs.pop(_param(flag), None) for flag in flags}
        fn(*args, **kwargs, account_settings={k: v for k, v in given.items() if v})

    wrapper.__signature__ = own.replace(parameters=[*kept, *added])  # type: ignore[attr-defined]
    return wrapper


def _param(flag: Flag) -> str:
    return flag.option.lstrip("-").replace("-", "_")

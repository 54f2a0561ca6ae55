"""The command that starts runs: ``run`` (and its dry run)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from ..engine.spend import Scope

from .budget_options import (
    AllowListPriceOpt,
    AssumedAnswerTokensOpt,
    DeadlineOpt,
    MaxCostOpt,
    MaxEnqueuedTokensOpt,
    MaxSpendOpt,
    MaxSpendOverOpt,
    PlaceAmongOpt,
    PricingOpt,
)
from .common import (
    DatasetFormatOpt,
    JobsDirOpt,
    LimitOpt,
    PhysicianCompletionsOpt,
    SmokeOpt,
    clock_of,
    friendly,
    warn,
)
from .finish import print_dry_run, run_group
from .project import current_project
from .run_options import (
    AnalysisPlanOpt,
    AnswerModelOpt,
    AsJsonOpt,
    BaseUrlOpt,
    BenchmarkOpt,
    CanaryOpt,
    CreateWaitOpt,
    DatasetOpt,
    DeleteRemoteFilesOpt,
    DryRunOpt,
    JudgeModelOpt,
    JudgePassesOpt,
    MaxAttemptsOpt,
    MaxRequestsPerBatchOpt,
    MaxRetriesOpt,
    MoveServiceOpt,
    NoWaitOpt,
    OnDemandRemainderOpt,
    PollIntervalOpt,
    ReasoningEffortOpt,
    ResendUnknownOpt,
    ResubmitAfterOpt,
    ResumeCancelledOpt,
    RunNameOpt,
    SettleOwedOpt,
    TailFlexOpt,
    TokenLimitWaitOpt,
    with_account_flags,
)


@friendly
@with_account_flags
def run(
    ctx: typer.Context,
    answer_model: AnswerModelOpt = None,
    judge_model: JudgeModelOpt = None,
    reasoning_effort: ReasoningEffortOpt = None,
    dataset: DatasetOpt = None,
    dataset_format: DatasetFormatOpt = None,
    smoke: SmokeOpt = False,
    limit: LimitOpt = None,
    benchmark: BenchmarkOpt = None,
    run_name: RunNameOpt = None,
    jobs_dir: JobsDirOpt = Path("jobs"),
    base_url: BaseUrlOpt = None,
    move_service: MoveServiceOpt = False,
    no_wait: NoWaitOpt = False,
    poll_interval: PollIntervalOpt = 30.0,
    delete_remote_files: DeleteRemoteFilesOpt = False,
    canary: CanaryOpt = None,
    analysis_plan: AnalysisPlanOpt = None,
    dry_run: DryRunOpt = False,
    as_json: AsJsonOpt = False,
    max_cost: MaxCostOpt = None,
    max_spend: MaxSpendOpt = None,
    max_spend_over: MaxSpendOverOpt = "run",
    pricing: PricingOpt = None,
    assumed_answer_tokens: AssumedAnswerTokensOpt = 800,
    max_enqueued_tokens: MaxEnqueuedTokensOpt = None,
    max_requests_per_batch: MaxRequestsPerBatchOpt = 50_000,
    max_retries: MaxRetriesOpt = 6,
    max_attempts: MaxAttemptsOpt = 3,
    token_limit_wait: TokenLimitWaitOpt = 60.0,
    judge_passes: JudgePassesOpt = 1,
    resubmit_after: ResubmitAfterOpt = 12 * 3600.0,
    on_demand_remainder: OnDemandRemainderOpt = False,
    tail_flex: TailFlexOpt = None,
    deadline: DeadlineOpt = None,
    allow_list_price: AllowListPriceOpt = False,
    place_among: PlaceAmongOpt = None,
    create_wait: CreateWaitOpt = None,
    resend_unknown: ResendUnknownOpt = False,
    settle_owed: SettleOwedOpt = False,
    resume_cancelled: ResumeCancelledOpt = False,
    physician_completions: PhysicianCompletionsOpt = False,
    account_settings: dict[str, str] | None = None,  # the registry's flags (--s3-uri…)
) -> None:
    """Start or resume a run: submit, poll, judge, collect and score, surviving restarts.

    Exit status: 0 when every selected case is scored (or, with --no-wait, when
    the run had already finished or another process is advancing it), 1 when
    some case ended in an error, 3 when --no-wait leaves the run still in progress
    or the run was cancelled.

    Example: batchbench run --answer-model gpt-5.4-mini --judge-model gpt-5.6-sol
    --dataset ../bedside-bench --smoke
    """
    from ..engine.deadline import parse_deadline
    from ..engine.options import Budget, Cases, Services
    from ..engine.settings import Settings
    from ..launch import RunOptions
    from ..lineup import lineup
    from ..placement import placed
    from ..scores.sealed import read_plan

    chosen = _checked(dataset, as_json, dry_run)
    cases = Cases(chosen, smoke, limit, tuple(benchmark or ()), dataset_format)
    services = Services(base_url, account_settings=account_settings or {}, move=move_service)
    budget = Budget(pricing, max_cost, assumed_answer_tokens, max_spend, _scope(max_spend_over))
    pacing = Settings(
        max_requests_per_batch=max_requests_per_batch,
        max_attempts=max_attempts,
        max_retries=max_retries,
        poll_interval=poll_interval,
        hold_seconds=token_limit_wait,
        resubmit_after=resubmit_after,
        on_demand_remainder=on_demand_remainder,
        tail_flex=tail_flex,
        deadline=None if deadline is None else parse_deadline(deadline, clock_of(ctx).time()),
        deadline_given=deadline or "",
        allow_list_price=_listed(allow_list_price, deadline),
        create_wait=create_wait,
        max_enqueued_tokens=max_enqueued_tokens,
        delete_remote_files=delete_remote_files,
        canary=canary,
    )
    answer_model, judges = _models(
        chosen, dataset_format, answer_model, judge_model, physician_completions
    )
    options = RunOptions(
        answer_model[0],
        judges[0],
        cases,
        run=run_name,
        jobs_dir=jobs_dir,
        reasoning_effort=reasoning_effort,
        judge_passes=judge_passes,
        services=services,
        budget=budget,
        settings=pacing,
        no_wait=no_wait,
        resend_unknown=resend_unknown,
        settle_owed=settle_owed,
        resume_cancelled=resume_cancelled,
        analysis_plan=read_plan(analysis_plan).record() if analysis_plan else None,
        clock=clock_of(ctx),
        answers_given=physician_completions,
    ).check()
    if place_among:  # one model, several services: where its answers go, and its name
        answer_model[0], run_name = placed(options, answer_model, place_among, smoke, warn)
    group = lineup(options, answer_model, judges, run_name, smoke, jobs_dir)
    if dry_run:
        print_dry_run(group, as_json)
        return
    run_group(group, options.clock, pricing=pricing)


def _models(
    dataset: Path,
    named_format: str | None,
    answers: list[str] | None,
    judges: list[str] | None,
    physicians: bool,
) -> tuple[list[str], list[str]]:
    """The models under test (or, where the dataset's own answers are graded, their
    label) and the judges (or the benchmark's own grader): one line when one is missing."""
    from ..bench.grading import dataset_format, grading_for
    from ..errors import ConfigError

    grading = grading_for(dataset_format(dataset, named_format))
    if physicians and grading.given_label is None:
        raise ConfigError(
            f"--physician-completions: {grading.name} gives no answers of its own"
            " (HealthBench's ideal completions do)"
        )
    given = grading.given_label if physicians or grading.always_given else None
    if given is not None and answers:
        flag = "--physician-completions" if physicians else f"a {grading.name} file"
        raise ConfigError(f"{flag} grades the dataset's own answers: leave out --answer-model")
    if not answers and given is None:
        raise ConfigError("run needs --answer-model MODEL (the model under test)")
    if not judges and grading.default_judge is None:
        raise ConfigError("run needs --judge-model MODEL (the model that marks each rubric item)")
    return answers or [str(given)], list(dict.fromkeys(judges or [str(grading.default_judge)]))


def _checked(dataset: Path | None, as_json: bool, dry_run: bool) -> Path:
    """The dataset a run needs (its absence one line saying where to name it); where the
    defaults not given came from, said (not with --json, which is the dry run's alone)."""
    from ..errors import ConfigError

    if dataset is None:
        raise ConfigError(
            "run needs --dataset DIR (or BATCHBENCH_DATASET, or dataset in a batchbench.toml):"
            " a BedsideBench checkout; `batchbench demo` runs the bundled sample"
        )
    read = current_project()
    if read is not None and not as_json:
        typer.echo(f"({read.said()})")
    if as_json and not dry_run:
        raise ConfigError("--json goes with --dry-run (use `batchbench status --json`)")
    return dataset


def _listed(allowed: bool, deadline: str | None) -> bool:
    """``--allow-list-price`` is a deadline's fallback: alone it would say nothing."""
    from ..errors import ConfigError

    if allowed and deadline is None:
        raise ConfigError("--allow-list-price goes with --deadline (the fallback it allows)")
    return allowed


def _scope(given: str) -> Scope:
    """``--max-spend-over``: one of the scopes a cap holds (else one line naming them)."""
    from ..engine.spend import SCOPES
    from ..errors import ConfigError

    for scope in SCOPES:
        if given == scope:
            return scope
    raise ConfigError(f"--max-spend-over {given!r}: one of {', '.join(SCOPES)}")

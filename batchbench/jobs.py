"""Starting, resuming, pricing and cancelling runs from command-line options.

The CLI parses options into a :class:`RunOptions` and calls one function here;
everything that checks inputs before a run directory or an API call exists
lives here too, so bad input never leaves a half-made run behind.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import protocol
from .api import BatchApi, check_base_url
from .costs import Pricing
from .dataset import Case
from .errors import ConfigError, RunLockedError
from .pipeline import Pipeline, Settings
from .report import write_report, write_summary
from .requests import MAX_LINES
from .results import rows_in_registry_order
from .rundir import Run, RunConfig, check_name
from .runs import BatchSeen, CancelRequested, Event, Redo, Resumed, fold
from .summary import summarize

__all__ = ["RunOptions", "Settings", "cancel_run", "dry_run", "execute", "prepare"]


@dataclass
class RunOptions:
    answer_model: str
    judge_model: str
    dataset: Path
    run: str | None = None
    jobs_dir: Path = Path("jobs")
    smoke: bool = False
    limit: int | None = None
    benchmarks: tuple[str, ...] = ()
    reasoning_effort: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    no_wait: bool = False
    pricing: Path | None = None
    max_cost: float | None = None
    assumed_answer_tokens: int = 800
    settings: Settings = field(default_factory=Settings)

    def check(self) -> RunOptions:
        """Every option's own rule, before anything is read, written or called."""
        _check_options(self)
        return self


REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


def _number(option: str, value: float | None, *, low: float, strict: bool = False) -> None:
    """A finite number at or above ``low`` (above it when ``strict``); NaN and inf refused."""
    if value is None:
        return
    if not math.isfinite(value):
        raise ConfigError(f"{option} must be a finite number, got {value}")
    if value < low or (strict and value == low):
        bound = f"greater than {low:g}" if strict else f"at least {low:g}"
        raise ConfigError(f"{option} must be {bound}, got {value}")


def _check_options(o: RunOptions) -> None:
    s = o.settings
    _number("--poll-interval", s.poll_interval, low=0, strict=True)
    _number("--token-limit-wait", s.hold_seconds, low=0)
    _number("--max-cost", o.max_cost, low=0)
    _number("--max-attempts", s.max_attempts, low=1)
    _number("--max-retries", s.max_retries, low=1)
    _number("--max-enqueued-tokens", s.max_enqueued_tokens, low=1)
    _number("--assumed-answer-tokens", o.assumed_answer_tokens, low=1)
    if not 1 <= s.max_requests_per_batch <= MAX_LINES:
        raise ConfigError(f"--max-requests-per-batch must be between 1 and {MAX_LINES}")
    if o.reasoning_effort is not None and o.reasoning_effort not in REASONING_EFFORTS:
        raise ConfigError(
            f"--reasoning-effort {o.reasoning_effort!r} is not one of"
            f" {', '.join(REASONING_EFFORTS)} (max is sent as xhigh)"
        )
    if o.run is not None:
        check_name(o.run)
    if o.base_url is not None:
        check_base_url(o.base_url)


def prepare(
    options: RunOptions, *, check_existing: bool = True
) -> tuple[Run, RunConfig, dict[str, Case]]:
    """Check the options and the dataset, and that an existing run of this name matches."""
    from .dataset import load_dataset, select_cases
    from .rundir import default_name

    name = check_name(options.run or default_name(options.answer_model, options.smoke))
    for label, value in (
        ("--answer-model", options.answer_model),
        ("--judge-model", options.judge_model),
    ):
        if not value.strip():
            raise ConfigError(f"{label} must not be empty")
    dataset_path = Path(options.dataset)
    ds = load_dataset(dataset_path)
    selected = select_cases(
        ds, smoke=options.smoke, limit=options.limit, benchmarks=options.benchmarks
    )
    config = RunConfig(
        name=name,
        answer_model=options.answer_model,
        judge_model=options.judge_model,
        reasoning_effort=options.reasoning_effort,
        protocol_version=protocol.PROTOCOL_VERSION,
        dataset=str(dataset_path.resolve()),
        dataset_sha256=ds.sha256,
        selection={
            "smoke": options.smoke,
            "limit": options.limit,
            "benchmarks": sorted(options.benchmarks),
        },
        case_ids=[c["case_id"] for c in selected],
    )
    run = Run(Path(options.jobs_dir) / name)
    if check_existing and run.exists():
        config = run.create(config)  # refuses a conflicting resume before anything else
    return run, config, {c["case_id"]: c for c in selected}


@dataclass
class RunResult:
    run: Run
    summary: dict[str, Any] | None
    complete: bool
    error: str | None = None  # why this run was set aside (in a group of several)


def execute(
    options: RunOptions,
    *,
    say: Callable[[str], None] = print,
    on_progress: Callable[[Pipeline], None] | None = None,
) -> tuple[Run, dict[str, Any] | None, bool]:
    """Start or resume a run; returns the run, its summary (when written) and completeness."""
    [result] = execute_group([options], say=say, on_progress=on_progress)
    return result.run, result.summary, result.complete


def execute_group(
    group: list[RunOptions],
    *,
    say: Callable[[str], None] = print,
    on_progress: Callable[[Pipeline], None] | None = None,
) -> list[RunResult]:
    """Start or resume one run per answer model and advance them all in one loop.

    Bad options stop everything before anything is created. A model the API does
    not know stops its own run only (when there are several); so does a run
    that fails while advancing.
    """
    from .api import make_client
    from .costs import load_pricing
    from .group import Group, Member

    prepared = [prepare(options) for options in group]
    pricing = load_pricing(group[0].pricing)
    max_cost = group[0].max_cost
    if max_cost is not None:
        plans = [make_plan(o, c, cases, pricing) for o, (_, c, cases) in zip(group, prepared)]
        total = {"batch_usd": None if any(p["total"]["batch_usd"] is None for p in plans) else
                 sum(p["total"]["batch_usd"] for p in plans)}  # fmt: skip
        stages = {f"{i}{k}": s for i, p in enumerate(plans) for k, s in p["stages"].items()}
        refusal = cost_refusal({"total": total, "stages": stages}, max_cost)
        if refusal:
            raise ConfigError(f"{refusal}; nothing was submitted")
    api = BatchApi(make_client(group[0].base_url, api_key=group[0].api_key))
    api.check_models([prepared[0][1].judge_model])
    results: list[RunResult] = []
    members: list[tuple[Member, Run, RunConfig]] = []
    with contextlib.ExitStack() as stack:
        for options, (run, config, cases) in zip(group, prepared):
            fresh = "RESUMING" if run.exists() else "NEW"
            say(f"{fresh} run {config.name!r} in {run.root.resolve()}")
            try:
                api.check_models([config.answer_model])
            except ConfigError as exc:
                if len(group) == 1:
                    raise
                say(f"error: run {config.name!r} not started: {exc}")
                results.append(RunResult(run, None, False, str(exc)))
                continue
            run.make_folder()
            stack.enter_context(run.lock())
            config = run.create(config)
            pipeline = Pipeline(run, config, cases, api, options.settings, say=say)
            if pipeline.state.cancelled:
                pipeline.record(Resumed())
            failed = [c for c in config.case_ids if pipeline.state.cases[c].final == "error"]
            # Rerunning the command redoes them, as the reference does. A --no-wait
            # invocation (cron, every few minutes) only resumes: redoing there would
            # pay for a case that fails for good again and again.
            if failed and not options.no_wait:
                pipeline.record(Redo(cases=failed))
                say(f"redoing {len(failed)} case(s) of {config.name!r} that ended in an error")
            members.append((Member(pipeline), run, config))
        settings = group[0].settings
        Group(
            [m for m, _, _ in members],
            api,
            settings.poll_interval,
            say=say,
            outage_seconds=settings.outage_seconds,
        ).advance(wait=not group[0].no_wait, on_progress=on_progress)
        for member, run, config in members:
            summary = write_run_summary(run, config)
            write_report(run, member.pipeline.state, config, pricing)
            results.append(RunResult(run, summary, member.pipeline.done(), member.error))
    order = [run.root for run, _, _ in prepared]
    return sorted(results, key=lambda r: order.index(r.run.root))


def write_run_summary(run: Run, config: RunConfig) -> dict[str, Any] | None:
    """Summarise a run's rows as the reference would, into its private summary file."""
    if not run.results_path.exists():
        return None
    rows = rows_in_registry_order(run.results_path, config.case_ids)
    summary = summarize(
        rows, expected_case_ids=config.case_ids, dataset_sha256=config.dataset_sha256
    )
    write_summary(run.summary_path, summary, mode=0o600)
    return summary


def make_plan(
    options: RunOptions, config: RunConfig, cases: dict[str, Case], pricing: Pricing
) -> dict[str, Any]:
    from .dryrun import plan

    return plan(
        [cases[c] for c in config.case_ids],
        answer_model=config.answer_model,
        judge_model=config.judge_model,
        reasoning_effort=config.reasoning_effort,
        pricing=pricing,
        max_requests=options.settings.max_requests_per_batch,
        max_bytes=options.settings.max_bytes_per_batch,
        max_tokens=options.settings.max_enqueued_tokens,
        assumed_answer_tokens=options.assumed_answer_tokens,
    )


def dry_run(options: RunOptions) -> dict[str, Any]:
    """The run's full plan and estimated cost, with no API call and nothing written."""
    from .costs import load_pricing

    _, config, cases = prepare(options, check_existing=False)
    plan = make_plan(options, config, cases, load_pricing(options.pricing))
    if options.max_cost is not None:
        plan["max_cost"] = {
            "usd": options.max_cost,
            "refused_because": cost_refusal(plan, options.max_cost),
        }
    return plan


def cost_refusal(plan: dict[str, Any], max_cost: float) -> str | None:
    """Why ``--max-cost`` refuses this plan, or None when it fits (one rule, run and dry run)."""
    estimate = plan["total"]["batch_usd"]
    if estimate is None:
        unpriced = [s["model"] for s in plan["stages"].values() if not s["priced"]]
        return (
            f"--max-cost: no price for {', '.join(map(repr, unpriced))};"
            " give one with --pricing FILE"
        )
    if estimate > max_cost:
        return f"estimated cost ${estimate:,.4f} at batch price exceeds --max-cost ${max_cost:,.4f}"
    return None


def cancel_run(
    jobs_dir: Path, name: str, base_url: str | None = None, api_key: str | None = None
) -> list[str]:
    """Stop a run: no new batches, and every in-flight batch cancelled. Returns their ids.

    It does not need the run's lock: the intent is one appended journal line,
    which a process advancing the run reads at its next tick (it then submits
    nothing more), and cancelling a batch is the API's business.
    """
    from .api import make_client
    from .rundir import open_run

    run = open_run(jobs_dir, name)
    config = run.load_config()
    api = BatchApi(make_client(base_url, api_key=api_key))
    run.record(CancelRequested())
    cancelled: list[str] = []
    for sub in fold(config.case_ids, run.events()).in_flight():
        if sub.batch_id is not None and api.cancel(sub.batch_id) is not None:
            cancelled.append(sub.batch_id)
    return cancelled


def refresh_status(
    jobs_dir: Path, name: str, base_url: str | None = None, api_key: str | None = None
) -> tuple[list[str], bool]:
    """Ask the API (one list call per 100 batches) for the live state of every batch in
    flight. When no process is advancing the run, what it says is journaled too.

    Returns a line per batch and whether the journal was updated.
    """
    from .api import make_client
    from .rundir import open_run
    from .submit import Submitter

    run = open_run(jobs_dir, name)
    config = run.load_config()
    api = BatchApi(make_client(base_url, api_key=api_key))
    seen: list[Event] = []
    try:
        with run.lock():
            flying = fold(config.case_ids, run.events()).in_flight()
            Submitter(run, config, api, lambda e: seen.append(run.record(e))).poll(flying)
            journaled = True
    except RunLockedError:  # the advancing process journals it itself
        flying = fold(config.case_ids, run.events()).in_flight()
        Submitter(run, config, api, seen.append).poll(flying)
        journaled = False
    live = {e.sub: e for e in seen if isinstance(e, BatchSeen)}
    lines = []
    for sub in flying:
        b = live.get(sub.id)
        status, counts = (b.status, b.counts) if b else (sub.status, sub.counts)
        done = counts.get("completed", 0) + counts.get("failed", 0)
        lines.append(f"{sub.id} {sub.batch_id} {status} {done}/{counts.get('total', '?')} lines")
    return lines, journaled

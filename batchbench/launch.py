"""Starting, resuming and pricing runs from their options.

The CLI parses options into :class:`RunOptions` and calls one function here. Everything
that can refuse (options, the dataset, a conflicting resume, a service other than the
run's, a model a service does not know, the cost cap) does so before a run exists.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path

from . import _failpoints
from .bench.dataset import Case, select_cases
from .bench.grading import load
from .costs.pricing import Pricing, load_pricing
from .engine.dryrun import DryRun, MaxCost, plan
from .engine.events import ServiceSet
from .engine.group import Group, Member
from .engine.options import GroupOptions, RunOptions
from .engine.pipeline import Pipeline
from .engine.resume import finished_note, reopen
from .engine.runconfig import RunConfig, Selection, check_name, default_name
from .engine.rundir import Run
from .engine.services import (
    check_answer_model,
    check_group_models,
    check_on_demand,
    connect_all,
    flex_note,
    new_services,
    run_services,
    stage_bundle,
    where_requests_go,
)
from .engine.settle import settle_owed
from .engine.spend import Spending, spend_cap
from .engine.state import fold
from .errors import ConfigError, RunLockedError
from .finished import Prepared, RunResult, finished_tick, settled, write_run_summary
from .kinds import Stage
from .providers.base import Client, Service
from .reporting import quiet
from .scores.noise import write_noise
from .scores.summary import DEFAULT_SAMPLES, Summary, check_samples
from .views.report_file import write_report

__all__ = ["RunOptions", "dry_run", "execute", "execute_group", "prepare"]


def prepare(
    options: RunOptions, *, check_existing: bool = True
) -> tuple[Run, RunConfig, dict[str, Case]]:
    """Check the options and the dataset, and that an existing run of this name matches."""
    chosen = options.cases
    name = check_name(options.run or default_name(options.answer_model, chosen.smoke))
    options.check()  # the models named, every number in range (once more: Python callers)
    dataset_path = Path(chosen.dataset)
    ds, grading = load(dataset_path, chosen.dataset_format)
    grading.check_passes(options.judge_passes)
    selected = select_cases(
        ds, smoke=chosen.smoke, limit=chosen.limit, benchmarks=chosen.benchmarks
    )
    given = options.answers_given or grading.always_given  # the dataset's own answers
    selected = grading.giving_answers(selected) if given else selected
    check_samples(DEFAULT_SAMPLES, len(selected))  # the summary's, before anything is paid
    config = RunConfig(
        name=name,
        answer_model=options.answer_model,
        judge_model=options.judge_model,
        reasoning_effort=options.reasoning_effort,
        protocol_version=grading.protocol_version,
        dataset=str(dataset_path.resolve()),
        dataset_sha256=ds.sha256,
        selection=Selection(
            smoke=chosen.smoke, limit=chosen.limit, benchmarks=sorted(chosen.benchmarks)
        ),
        case_ids=[c["case_id"] for c in selected],
        services=new_services(
            options.judge_model if given else options.answer_model,
            options.judge_model,
            options.services.base_url,
            options.services.base_urls,
            settings=options.services.account_settings,
        ),
        judge_passes=options.judge_passes,
        answers_from=options.answers_from,
        answers_given=grading.given if given else None,
        analysis_plan=options.analysis_plan,
        created_at=options.clock.time(),
    )
    run = Run(Path(options.jobs_dir) / name)
    if check_existing and run.exists():
        config = run.create(config)  # refuses a conflicting resume before anything else
    return run, config, {c["case_id"]: c for c in selected}


def execute(
    options: RunOptions,
    *,
    say: Callable[[str], None] = quiet,
    warn: Callable[[str], None] | None = None,
    on_progress: Callable[[Pipeline], None] | None = None,
) -> tuple[Run, Summary | None, bool]:
    """Start or resume a run; returns the run, its summary (when written) and completeness."""
    [result] = execute_group([options], say=say, warn=warn, on_progress=on_progress)
    return result.run, result.summary, result.complete


def execute_group(
    group: list[RunOptions],
    *,
    say: Callable[[str], None] = quiet,
    warn: Callable[[str], None] | None = None,
    on_progress: Callable[[Pipeline], None] | None = None,
) -> list[RunResult]:
    """Start or resume one run per answer model and advance them all in one loop. Bad
    options stop everything before anything is created. A model its service does not
    know stops its own run only (when there are several); so does a run that fails."""
    warn = warn or say
    shared = GroupOptions.of(group)
    prepared = [prepare(options) for options in group]
    pricing = load_pricing(shared.pricing)
    if shared.no_wait:  # a cron tick of a group that has finished asks no service
        finished = finished_tick(prepared, pricing)
        if finished is not None:
            return finished
    if shared.max_cost is not None:
        _check_cost(group, prepared, pricing, shared.max_cost)
    services = [
        _services(options, run, config) for options, (run, config, _) in zip(group, prepared)
    ]
    clients = connect_all(
        (s for s, _ in services), warn=warn, credentials=shared.credentials, clock=shared.clock
    )
    try:
        return _advance(group, prepared, services, clients, pricing, shared, say, warn, on_progress)
    finally:  # no connection outlives the command (a process that runs on: Python, tests)
        for client in clients.values():
            client.close()


def _advance(
    group: list[RunOptions],
    prepared: list[Prepared],
    services: list[tuple[dict[Stage, Service], list[ServiceSet]]],
    clients: dict[Service, Client],
    pricing: Pricing,
    shared: GroupOptions,
    say: Callable[[str], None],
    warn: Callable[[str], None],
    on_progress: Callable[[Pipeline], None] | None,
) -> list[RunResult]:
    """Start every run of the group on its clients and advance them to the end."""
    preflight = not settled(group, prepared)  # a finished run buys nothing: no look-ups
    if preflight:
        _look_up(group, prepared, services, clients, pricing)
    results: list[RunResult] = []
    members: list[tuple[Member, Run, RunConfig]] = []
    spending: Spending = []  # --max-spend-over group: the runs started so far
    with contextlib.ExitStack() as stack:
        for options, made, found in zip(group, prepared, services):
            started = _start(
                stack,
                options,
                made,
                found,
                clients,
                len(group),
                say,
                warn,
                pricing,
                preflight and len(group) > 1,
                spending,
            )
            if isinstance(started, RunResult):
                results.append(started)
            else:
                members.append(started)
        Group(
            [m for m, _, _ in members],
            shared.poll_interval,
            warn=warn,
            clock=shared.clock,
            outage_seconds=shared.outage_seconds,
        ).advance(wait=not shared.no_wait, on_progress=on_progress)
        for member, run, config in members:
            if member.superseded is not None:  # another machine's now: nothing written here
                note = f"{member.superseded}: nothing more for this tick"
                results.append(RunResult(run, None, False, note=note))
            else:
                results.append(_finish(member, run, config, pricing))
    order = [run.root for run, _, _ in prepared]
    return sorted(results, key=lambda r: order.index(r.run.root))


def _look_up(
    group: list[RunOptions],
    prepared: list[Prepared],
    services: list[tuple[dict[Stage, Service], list[ServiceSet]]],
    clients: dict[Service, Client],
    pricing: Pricing,
) -> None:
    """Every model the invocation buys from, asked of its service before anything is
    bought: a single run's answer model first (the one the user named), the judges, every
    model of a group (with a did-you-mean), the on-demand endpoints. A group's members
    are looked up again one by one as they start: an unknown one sets its run aside."""
    if len(group) == 1 and not prepared[0][1].answers_given:  # given answers: none asked
        check_answer_model(clients, services[0][0]["answers"], prepared[0][1].answer_model)
    for service, model in {
        (s["judges"], c.model("judges")) for (s, _), (_, c, _) in zip(services, prepared)
    }:
        clients[service].check_models([model])
    if len(group) > 1:
        check_group_models(
            clients,
            [(s["answers"], c.answer_model) for (s, _), (_, c, _) in zip(services, prepared)],
            pricing,
        )
    for options, (stages, _), (_, config, _) in zip(group, services, prepared):
        if options.settings.on_demand_remainder:
            check_on_demand(clients, stages, config)


def _services(
    options: RunOptions, run: Run, config: RunConfig
) -> tuple[dict[Stage, Service], list[ServiceSet]]:
    """The services the run's stages speak to (those it recorded, when it has), and the
    journal lines recording any new."""
    state = run.state(config.case_ids) if run.exists() else fold(config.case_ids, [])
    return run_services(
        config,
        state,
        options.services.base_url,
        move=options.services.move,
        given=options.services.base_urls,
        settings=options.services.account_settings,
    )


def _start(
    stack: contextlib.ExitStack,
    options: RunOptions,
    made: Prepared,
    found: tuple[dict[Stage, Service], list[ServiceSet]],
    clients: dict[Service, Client],
    runs: int,
    say: Callable[[str], None],
    warn: Callable[[str], None],
    pricing: Pricing,
    check_model: bool,
    spending: Spending,  # the group's runs, for a cap over them all
) -> tuple[Member, Run, RunConfig] | RunResult:
    """One run of the group, made ready to advance: its model checked (``check_model``), its
    folder made and locked, its pipeline built; or set aside (a RunResult) — a model its
    service does not know (when the group has others), a lock another process holds (a
    --no-wait tick), a tick of a run already done."""
    run, config, cases = made
    stages, changes = found
    try:  # before a word of a new run: a misspelt model is not one
        if check_model:
            check_answer_model(clients, stages["answers"], config.answer_model)
    except ConfigError as exc:
        if runs == 1:
            raise
        say(f"error: run {config.name!r} not started: {exc}")
        return RunResult(run, None, False, str(exc))
    existed = run.exists()
    run.make_folder()
    _failpoints.hit("locking")  # the run read, its lock not yet taken
    try:
        stack.enter_context(run.lock(options.clock))
    except RunLockedError as exc:
        if not options.no_wait:
            raise
        if run.exists():  # another configuration is refused even so
            run.create(config)
        return RunResult(run, None, False, note=f"{exc}: nothing for this tick")
    config = run.create(config)
    try:
        stack.enter_context(run.token_lock(config.run_id))
    except RunLockedError as exc:
        if not options.no_wait:
            raise
        return RunResult(run, None, False, note=f"{exc}: nothing for this tick")
    # Said once the run is this command's: a refusal (moved, locked, …) is said alone.
    say(f"{'RESUMING' if existed else 'NEW'} run {config.name!r} in {run.shown}")
    inside = where_requests_go(stages)
    if inside:
        say(inside)
    if options.settings.tail_flex is not None:
        say(flex_note(stages))
    if run.name != config.name:
        warn(
            f"warning: folder {run.shown} holds run {config.name!r} (its"
            f" run.json): a copy of that run, one run with it: what either buys, the"
            " other adopts"
        )
    # A plain invocation is the user's: a failing create gets a fresh outage window; a
    # --no-wait tick shares the one its run's journal started.
    window = None if options.no_wait else options.clock.time()
    b = options.budget  # --max-spend: this run's cap, or the group's or the folder's
    spend = spend_cap(b.max_spend, b.max_spend_over, pricing, config, options.jobs_dir, spending)
    pipeline = Pipeline(
        run,
        config,
        cases,
        stage_bundle(stages, clients),
        options.settings,
        warn=warn,
        clock=options.clock,
        window_from=window,
        spend=spend,
    )
    spending.append((lambda: pipeline.state, config))  # the group's runs under one cap
    for change in changes:
        pipeline.record(change)
    if options.no_wait and pipeline.done():
        if not run.summary_path.is_file():  # a tick killed before it wrote it: written now
            write_run_summary(run, config)
            write_report(run, pipeline.state, config, pricing)
        return RunResult(run, None, True, note=finished_note(run, config, pipeline.state))
    reopen(pipeline, options, say, pricing)
    if options.settle_owed:
        settle_owed(pipeline, pricing, say)
    return Member(pipeline), run, config


def _finish(member: Member, run: Run, config: RunConfig, pricing: Pricing) -> RunResult:
    """A run the loop advanced: its summary, its judge noise once done, its report."""
    summary = write_run_summary(run, config)
    if member.pipeline.done():
        collected = member.pipeline.state.judge_passes_collected(config.judge_passes)
        write_noise(run, config, member.pipeline.cases, collected)
    write_report(run, member.pipeline.state, config, pricing)
    return RunResult(run, summary, member.pipeline.done(), member.error)


def _check_cost(
    group: list[RunOptions],
    prepared: list[tuple[Run, RunConfig, dict[str, Case]]],
    pricing: Pricing,
    max_cost: float,
) -> None:
    """``--max-cost`` against the sum of every run's estimate, before anything is created."""
    plans = [make_plan(o, c, cases, pricing) for o, (_, c, cases) in zip(group, prepared)]
    refusal = cost_refusal(plans, max_cost)
    if refusal:
        raise ConfigError(f"{refusal}; nothing was submitted")


def make_plan(
    options: RunOptions, config: RunConfig, cases: dict[str, Case], pricing: Pricing
) -> DryRun:
    return plan(
        [cases[c] for c in config.case_ids],
        answer_model=config.answer_model,
        judge_model=config.judge_model,
        reasoning_effort=config.reasoning_effort,
        pricing=pricing,
        max_requests=options.settings.max_requests_per_batch,
        max_bytes=options.settings.max_bytes_per_batch,
        max_tokens=options.settings.max_enqueued_tokens,
        assumed_answer_tokens=options.budget.assumed_answer_tokens,
        judge_passes=config.judge_passes,
        borrowed=config.answers_from is not None,
        grading=config.grading,
    )


def dry_run(options: RunOptions) -> DryRun:
    """The run's full plan and estimated cost, with no API call and nothing written."""
    _, config, cases = prepare(options, check_existing=False)
    budget = options.budget
    result = make_plan(options, config, cases, load_pricing(budget.pricing))
    if budget.max_cost is not None:
        result["max_cost"] = MaxCost(
            usd=budget.max_cost, refused_because=cost_refusal([result], budget.max_cost)
        )
    return result


def cost_refusal(plans: Sequence[DryRun], max_cost: float) -> str | None:
    """Why ``--max-cost`` refuses these runs' plans together, or None when they fit
    (one rule, run and dry run, one model or several)."""
    costs = [p["total"]["batch_usd"] for p in plans]
    if any(c is None for c in costs):
        stages = [s for p in plans for s in p["stages"].values()]
        unpriced = list(dict.fromkeys(s["model"] for s in stages if not s["priced"]))
        return (
            f"--max-cost: no price for {', '.join(map(repr, unpriced))};"
            " give one with --pricing FILE"
        )
    estimate = sum(c or 0.0 for c in costs)
    if estimate > max_cost:
        return f"estimated cost ${estimate:,.4f} at batch price exceeds --max-cost ${max_cost:,.4f}"
    return None

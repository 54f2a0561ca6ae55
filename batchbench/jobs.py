"""Starting, resuming, pricing and cancelling runs from command-line options.

The CLI parses options into a :class:`RunOptions` and calls one function here;
everything that checks inputs before a run directory or an API call exists
lives here too, so bad input never leaves a half-made run behind.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import protocol
from .api import BatchApi, check_base_url
from .costs import Pricing
from .dataset import Case
from .errors import ConfigError, ResultsError, RunLockedError
from .pipeline import Pipeline, Settings
from .report import write_report, write_summary
from .requests import MAX_LINES
from .results import rows_in_registry_order
from .rundir import SUMMARY_FILE, Run, RunConfig, check_name
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


def execute(
    options: RunOptions,
    *,
    say: Callable[[str], None] = print,
    on_progress: Callable[[Pipeline], None] | None = None,
) -> tuple[Run, dict[str, Any] | None, bool]:
    """Start or resume a run; returns the run, its summary (when written) and completeness."""
    from .api import make_client
    from .costs import load_pricing

    run, config, cases = prepare(options)
    state = "RESUMING" if run.exists() else "NEW"
    say(f"{state} run {config.name!r} in {run.root.resolve()}")
    pricing = load_pricing(options.pricing)
    if options.max_cost is not None:
        refusal = cost_refusal(make_plan(options, config, cases, pricing), options.max_cost)
        if refusal:
            raise ConfigError(f"{refusal}; nothing was submitted")
    client = make_client(options.base_url, api_key=options.api_key)
    api = BatchApi(client)
    api.check_models([config.answer_model, config.judge_model])
    run.make_folder()
    with run.lock():
        config = run.create(config)
        pipeline = Pipeline(run, config, cases, api, options.settings, say=say)
        if pipeline.state.cancelled:
            pipeline.record(Resumed())
        failed = [c for c in config.case_ids if pipeline.state.cases[c].final == "error"]
        if failed:  # rerunning the same command redoes them, as the reference does
            pipeline.record(Redo(cases=failed))
            say(f"redoing {len(failed)} case(s) that ended in an error")
        complete = pipeline.advance(wait=not options.no_wait, on_progress=on_progress)
        summary = write_run_summary(run, config)
        write_report(run, pipeline.state, config, pricing)
    return run, summary, complete


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


def summarize_results(
    results: Path,
    dataset: Path | None,
    *,
    smoke: bool = False,
    limit: int | None = None,
    benchmarks: tuple[str, ...] = (),
    samples: int = 10_000,
    seed: int = 42,
    output: Path | None = None,
    force: bool = False,
) -> tuple[dict[str, Any], Path, list[str]]:
    """``batchbench summarize``: check the rows, summarise them, guard the target, write.

    Returns the summary, where it was written, and notes for the user.
    """
    from .dataset import load_dataset, select_cases
    from .results import check_against, read_numbered_rows, summary_path

    expected: list[str] | None = None
    digest: str | None = None
    numbered = read_numbered_rows(results)
    if dataset is not None:
        ds = load_dataset(dataset)
        selected = select_cases(ds, smoke=smoke, limit=limit, benchmarks=benchmarks)
        expected, digest = [c["case_id"] for c in selected], ds.sha256
        check_against(numbered, results, ds.by_id())
        if not {row["case_id"] for _, row in numbered} & set(expected):
            raise ResultsError(
                f"{results}: no row for any of the {len(expected)} selected cases of {dataset}"
            )
    elif smoke or limit is not None or benchmarks:
        raise ConfigError("--smoke, --limit and --benchmark select from a dataset: pass --dataset")
    elif not numbered:
        raise ResultsError(f"{results}: no rows")
    rows = [row for _, row in numbered]
    summary = summarize(
        rows, samples=samples, seed=seed, expected_case_ids=expected, dataset_sha256=digest
    )
    out = output or summary_path(results)
    if not force:
        _guard_target(out, summary, expected)
    mode = out.stat().st_mode & 0o777 if out.exists() else 0o644  # a run's stays private
    write_summary(out, summary, mode=mode)
    successes = Counter(r["case_id"] for r in rows if "error" not in r)
    several = sum(
        1 for cid, n in successes.items() if n > 1 and (expected is None or cid in expected)
    )
    notes = (
        [f"note: {several} case(s) have several successful rows; the last of each counts"]
        if several
        else []
    )
    return summary, out, notes


def _guard_target(out: Path, summary: dict[str, Any], expected: list[str] | None) -> None:
    """Never replace a summary of another dataset or selection without --force."""
    if not out.exists():
        return
    advice = "write it elsewhere with --output FILE, or replace it with --force"
    run = Run(out.parent)
    if out.name == SUMMARY_FILE and run.exists():  # a run's own summary
        config = run.load_config()
        if summary["dataset_sha256"] != config.dataset_sha256 or expected != config.case_ids:
            raise ConfigError(
                f"{out} is run {config.name!r}'s own summary, of its dataset and selection"
                f" ({len(config.case_ids)} cases, digest {config.dataset_sha256[:12]}); {advice}"
            )
        return
    try:
        existing = json.loads(out.read_text(encoding="utf-8"))
        old_n = {b: int(v["n"]) for b, v in existing["benchmarks"].items()}
        old_digest = existing["dataset_sha256"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise ConfigError(f"{out} exists and is not a summary; {advice}") from None
    new_n = {b: v["n"] for b, v in summary["benchmarks"].items()}
    new_digest = summary["dataset_sha256"]
    if old_digest != new_digest:
        raise ConfigError(
            f"{out} exists with another dataset digest ({old_digest} → {new_digest}); {advice}"
        )
    # More rows since (a run that went on) only add cases; fewer or other
    # benchmarks, or fewer cases in one, is another selection.
    if set(old_n) != set(new_n) or any(new_n[b] < old_n[b] for b in old_n):
        raise ConfigError(f"{out} exists with another selection of cases; {advice}")

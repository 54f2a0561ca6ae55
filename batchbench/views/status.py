"""Where a run stands, from its journal alone: ``status``, ``list`` and ``report.json``."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, TypedDict

from ..bench.causes import error_cause, errors_line
from ..costs.pricing import Pricing, load_pricing
from ..costs.rollup import RunCost, run_cost, stage_price_text, total_text, usage_text
from ..engine import deadline
from ..engine.deadline import DeadlineRecord
from ..engine.provenance import provenance
from ..engine.runconfig import RunConfig
from ..engine.rundir import Run
from ..engine.state import RunState
from ..formats import duration, interval, num, usd
from ..kinds import STAGES, RunStatus, Stage
from ..providers import judge_note, judge_service
from ..scores.noise import JudgeNoise, load_noise, noise_text
from ..scores.summary_file import read_summary
from .progress import eta
from .provenance import provenance_lines


class CaseCounts(TypedDict):
    total: int
    scored: int
    errors: int
    pending: int


class BatchRecord(TypedDict):
    submission: str
    batch_id: str | None
    status: str  # batchbench's word (queued, running, completed, ...)
    service_status: str  # the service's own
    requests: int
    adopted: bool


class _RunStatus(TypedDict):
    run: str
    status: RunStatus
    as_of: float | None
    dataset: str
    errors_by_cause: dict[str, int]
    answer_model: str
    judge_model: str
    dataset_sha256: str
    cases: CaseCounts
    stages: dict[Stage, StageStatus]
    batches: list[BatchRecord]
    anomalies: list[str]
    losses: dict[str, int]  # stage → requests the service lost and that were sent again
    stalled: int  # batches not started in time, cancelled and sent again (--resubmit-after)
    cost: RunCost


class FlexRecord(TypedDict):
    """The lines sent on the flex tier (a tail, ``--tail-flex``; a deadline's fallback)."""

    sent: int  # lines sent there
    finished: int  # of which finished (a row's answer or judgement came from flex)
    batch_usd: float | None  # what they cost, at the batch price (None: unpriced)


class RunStatusRecord(_RunStatus, total=False):
    """Everything ``batchbench status`` shows (``--json`` prints it as is)."""

    flex: FlexRecord
    eta_seconds: float  # at the pace of the batches in flight, as of ``as_of``
    projected_batch_usd: dict[str, float | None]  # stage and "total" → USD when done
    overall_macro_mean: float
    overall_ci95: list[float]
    judge_noise: JudgeNoise  # a run graded with --judge-passes K > 1, once done
    judge_noise_problem: str  # why judge_noise.json is not shown as fact
    summary_problem: str  # why the summary's figures are not shown
    project_file: str | None  # the project file the command's defaults came from
    judge_service: str  # the judge's, when its model is not OpenAI's (not the reference's)
    benchmark: str  # what the run grades, when not BedsideBench ("HealthBench")
    provenance: dict[str, Any]  # requested and served models, query span (#66.1)
    deadline: DeadlineRecord  # run --deadline: each batch in flight's chance (in progress)


class StageStatus(TypedDict):
    """One stage's progress, counted from collected results only."""

    done: int
    failed: int
    total: int
    batches: dict[str, int]  # batch state (batchbench's word) → how many
    running: list[str]  # "<submission> <state>: <n>/<total> lines done" for batches in flight
    usage: dict[str, int]  # tokens used so far, by kind
    stopped: list[dict[str, str]]  # submission, reason (StopReason), detail: why it stopped


# Why a stage stopped, in words (the journal's StopReason).
STOP_WORDS = {
    "owed": "results owed past the wait",
    "mixed": "a batch mixing the run's requests with others'",
    "ids": "a result file naming requests not sent",
    "replies": "replies filed under other requests",
}


def stage_status(state: RunState, stage: Stage) -> StageStatus:
    """One stage's progress and its batches, for ``status`` and report.json."""
    progress = state.progress(stage)
    batches: dict[str, int] = {}
    running: list[str] = []
    stopped: list[dict[str, str]] = []
    for sub in state.subs.values():
        if sub.stage != stage:
            continue
        batches[sub.word] = batches.get(sub.word, 0) + 1
        view = sub.view
        if sub.in_flight and view is not None and view.phase == "pending":
            since = time.strftime("%Y-%m-%d %H:%M", time.gmtime(sub.create_started or 0))
            again = " (its requests were sent again once)" if sub.stalled else ""
            running.append(f"{sub.id} queued since {since} UTC, not started{again}")
        elif sub.in_flight and sub.tailed:
            running.append(
                f"{sub.id} {sub.word} (cut short): its {sub.tailed} unfinished lines go on flex"
                " once the service has ended it"
            )
        elif sub.in_flight and (sub.flex or sub.listed):
            answered = sum(1 for rid in sub.ids() if rid in state.calls_done)
            where = "on flex" if sub.flex else "on demand at the list price"
            running.append(f"{sub.id} {where}: {answered}/{len(sub.lines)} lines answered")
        elif sub.in_flight and view is not None and view.total:
            ran = f" ({sub.ran} ran before, billed)" if sub.ran > view.done else ""
            running.append(f"{sub.id} {sub.word}: {view.lines_text}{ran}")
        elif sub.terminal and not sub.collected and sub.ran:  # billed, not yet collected
            said = f"{sub.ran} of its {len(sub.lines)} lines ran (billed), not collected yet"
            running.append(f"{sub.id} {sub.word}: {said}: the run's next `run` collects them")
        elif sub.batch_id is None and sub.candidates:
            running.append(
                f"{sub.id} unconfirmed: one of {', '.join(sub.candidates)} (a lost create;"
                " the service keeps no tag, so its results will tell)"
            )
        if sub.stopped and not sub.collected:
            stopped.append(
                {"submission": sub.id, "reason": sub.stopped, "detail": sub.contradiction or ""}
            )
            running.append(f"{sub.id} stopped ({STOP_WORDS[sub.stopped]}): {sub.contradiction}")
        elif sub.contradiction and not sub.collected:
            since = time.strftime("%Y-%m-%d %H:%M", time.gmtime(sub.owed_since or 0))
            running.append(f"{sub.id} results owed since {since} UTC: {sub.contradiction}")
    return StageStatus(
        done=progress.done,
        failed=progress.failed,
        total=progress.total,
        batches=batches,
        running=running,
        usage=dict(state.usage.get(stage, {})),
        stopped=stopped,
    )


def run_cost_of(state: RunState, config: RunConfig, pricing: Pricing) -> RunCost:
    return run_cost(state.usage, config.models, pricing, config.providers, state.listed_usage)


def flex_record(state: RunState, config: RunConfig, pricing: Pricing) -> FlexRecord | None:
    """How many lines went on flex and finished there, at what price (None: none went)."""
    flex = {s.id for s in state.subs.values() if s.flex}
    if not flex:
        return None
    finished = sum(
        case.stage(stage).sub in flex and case.stage(stage).status == "ok"
        for case in state.cases.values()
        for stage in STAGES
    )
    costs = run_cost(state.flex_usage, config.models, pricing, config.providers)
    cost = costs["total"]["priced_batch_usd"]
    sent = sum(len(state.subs[s].lines) for s in flex)
    return {"sent": sent, "finished": finished, "batch_usd": cost}


def projected_cost(state: RunState, cost: RunCost, passes: int) -> dict[str, float | None] | None:
    """What each stage will have cost when done, at its cost per request so far (None for a
    stage with no priced request yet), the total once every stage has one; None if none."""
    out: dict[str, float | None] = {}
    for stage in STAGES:
        spent = cost["stages"][stage]
        requests, usd_ = spent.get("requests", 0), spent["batch_usd"]
        expected = state.progress(stage).total * (passes if stage == "judges" else 1)
        out[stage] = (
            None if not requests or usd_ is None else usd_ / requests * max(requests, expected)
        )
    known = [v for v in out.values() if v is not None]
    if not known:
        return None
    out["total"] = sum(known) if len(known) == len(STAGES) else None
    return out


def flex_text(flex: FlexRecord) -> str:
    price = usd(flex["batch_usd"]) if flex["batch_usd"] is not None else "unpriced"
    return (
        f"flex: {flex['finished']} of the {flex['sent']} line(s) sent on the flex tier"
        f" (--tail-flex, --deadline) finished there, at the batch price: {price}"
    )


def run_status(
    run: Run,
    pricing: Pricing | None = None,
    state: RunState | None = None,
    now: float | None = None,
) -> RunStatusRecord:
    """All `batchbench status` shows, from the journal alone (``state``: already folded;
    ``now``: when a deadline's chances are asked, the clock's time by default)."""
    pricing, config = pricing or load_pricing(), run.load_config()
    state = state or run.state(config.case_ids)
    finals = Counter(c.final for c in state.cases.values())
    scored, errors = finals["scored"], finals["error"]
    status: RunStatus
    untold = [s for s in state.in_flight() if s.view is None or s.view.phase != "cancelling"]
    if scored + errors == len(state.cases):
        status = "failed" if not scored else "finished with errors" if errors else "complete"
    elif state.cancelled:
        status = "cancel pending" if untold else "cancelled"
    else:
        status = "in progress" if state.subs else "not started"
    causes = Counter(error_cause(c.error or "") for c in state.cases.values() if c.final == "error")
    out: RunStatusRecord = {
        "run": config.name,
        "status": status,
        "as_of": state.last_event,
        "dataset": config.dataset,
        "errors_by_cause": dict(causes.most_common()),
        "answer_model": config.answer_model,
        "judge_model": config.judge_model,
        "dataset_sha256": config.dataset_sha256,
        "cases": {
            "total": len(state.cases),
            "scored": scored,
            "errors": errors,
            "pending": len(state.cases) - scored - errors,
        },
        "stages": {stage: stage_status(state, stage) for stage in STAGES},
        "batches": [
            {
                "submission": s.id,
                "batch_id": s.batch_id,
                "status": s.word,
                "service_status": s.status,
                "requests": len(s.lines),
                "adopted": s.adopted,
            }
            for s in state.subs.values()
        ],
        "anomalies": list(state.anomalies),
        "losses": dict(state.losses),
        "stalled": state.stalls,
        "cost": run_cost_of(state, config, pricing),
    }
    if config.grading.per_item:
        out["benchmark"] = config.grading.name
    service = judge_service(config.judge_model)
    if service is not None:  # named: not the reference's OpenAI judge
        out["judge_service"] = service
    if run.summary_path.exists() or run.summary_path.is_symlink():
        summary = read_summary(run.summary_path)
        # Checked against the journal's count of its cases: a stale summary states nothing.
        scored = sum(1 for c in state.cases.values() if c.final == "scored")
        errors = sum(1 for c in state.cases.values() if c.final == "error")
        if (summary["completed_cases"], summary["errors"]) == (scored, errors):
            out["overall_macro_mean"] = summary["overall_macro_mean"]
            out["overall_ci95"] = summary["overall_ci95"]
        else:
            out["summary_problem"] = (
                f"{run.summary_path} counts {summary['completed_cases']} scored and"
                f" {summary['errors']} failed cases, the journal {scored} and {errors}:"
                " stale or edited"
            )
    flex = flex_record(state, config, pricing)
    if flex is not None:
        out["flex"] = flex
    if status == "in progress":
        left = eta(state, state.last_event or 0.0)
        if left is not None:
            out["eta_seconds"] = left
        projected = projected_cost(state, out["cost"], config.judge_passes)
        if projected is not None:
            out["projected_batch_usd"] = projected
        if state.deadline is not None:
            when = time.time() if now is None else now
            out["deadline"] = deadline.record(state, config, run.root.parent, when)
    out["provenance"] = provenance(state, config)
    noise, problem = load_noise(run)
    if noise is not None:
        out["judge_noise"] = noise
    if problem is not None:
        out["judge_noise_problem"] = problem
    return out


def _age(when: float | None, now: float) -> str:
    if when is None:
        return "nothing recorded yet"
    minutes = int(now - when) // 60
    ago = f"{minutes} min ago" if minutes < 120 else f"{minutes // 60} h ago"
    ago = "just now" if minutes < 1 else ago
    return f"as of {time.strftime('%H:%M', time.gmtime(when))} UTC, {ago}"


def status_text(status: RunStatusRecord, now: float | None = None) -> str:
    c = status["cases"]
    note = judge_note(status["judge_model"]) if "judge_service" in status else None
    judge = status["judge_model"] + (f", {note}" if note else "")
    lines = [
        f"{status['run']}: {status['status']}  ({status['answer_model']} judged by"
        f" {judge}; {_age(status['as_of'], now or time.time())})",
        f"  cases: {c['scored']} scored, {c['errors']} errors, {c['pending']} pending"
        f" of {c['total']}",
    ]
    if status["errors_by_cause"]:
        lines.append(f"  {errors_line(status['errors_by_cause'])}")
    for stage, s in status["stages"].items():
        batches = ", ".join(f"{n} {k}" for k, n in sorted(s["batches"].items())) or "none yet"
        lines.append(
            f"  {stage}: {s['done']}/{s['total']} done, {s['failed']} failed; batches: {batches}"
        )
        lines.extend(f"    {r}" for r in s["running"])
    if "eta_seconds" in status:
        when = _age(status["as_of"], now or time.time())
        lines.append(
            f"  ETA {duration(status['eta_seconds'])} ({when}; at the pace of the batches in"
            " flight)"
        )
    if "deadline" in status:
        due = status["deadline"]
        lines.append(f"  deadline {due['at']}: {duration(due['seconds_left'])} left")
        lines.extend(f"    {line}" for line in due["batches"])
    if "projected_batch_usd" in status:
        proj = status["projected_batch_usd"]
        unknown = "? (no priced results yet)"
        each = ", ".join(
            f"{stage} {unknown if proj[stage] is None else usd(proj[stage])}" for stage in STAGES
        )
        whole = f"{usd(proj['total'])}: " if proj["total"] is not None else ""
        lines.append(
            f"  projected cost when done {whole}{each} at batch price (at each stage's cost"
            " per request so far)"
        )
    if "overall_macro_mean" in status:
        lo, hi = status["overall_ci95"]
        mean = num(status["overall_macro_mean"])
        named = status.get("benchmark")  # HealthBench's: simple-evals' score; the CI ours
        said = (
            f"score {mean} (simple-evals' {named} score)  95% CI {interval([lo, hi])} (ours)"
            if named
            else f"overall macro mean {mean}  95% CI {interval([lo, hi])}"
        )
        lines.append(f"  {said}")
    if "summary_problem" in status:
        lines.append(f"  summary not shown: {status['summary_problem']}")
    if "judge_noise" in status:
        lines.append(f"  {noise_text(status['judge_noise'])}")
    if "judge_noise_problem" in status:
        lines.append(f"  judge noise not shown: {status['judge_noise_problem']}")
    cost = status.get("cost")
    if cost:
        for stage_name, stage_cost in cost["stages"].items():
            lines.append(
                f"  {stage_name} usage: {usage_text(stage_cost)}; {stage_price_text(stage_cost)}"
            )
        total = cost["total"]
        if total["priced_batch_usd"] is not None:
            sync = f" (sync {usd(total['sync_usd'])})" if total["sync_usd"] is not None else ""
            lines.append(f"  total cost {total_text(cost)} at batch price{sync}")
    if status["status"] == "cancel pending":
        lines.append(
            "  the cancel did not reach every batch in flight: they still run; run"
            f" `batchbench cancel {status['run']}` again"
        )
    lost = {stage: n for stage, n in status["losses"].items() if n}
    if lost:
        each = ", ".join(f"{stage} {n}" for stage, n in lost.items())
        lines.append(
            f"  lost by the service and sent again: {each} (not counted against --max-retries)"
        )
    if "flex" in status:
        lines.append(f"  {flex_text(status['flex'])}")
    if status.get("stalled"):
        lines.append(
            f"  {status['stalled']} batch(es) had not started after --resubmit-after: cancelled"
            " and their requests sent again (once)"
        )
    if "provenance" in status:
        lines.extend(f"  {line}" for line in provenance_lines(status["provenance"]))
    for anomaly in status["anomalies"]:
        lines.append(f"  anomaly: {anomaly}")
    return "\n".join(lines)

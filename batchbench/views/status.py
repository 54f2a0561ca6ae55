"""Where a run stands, from its journal alone: ``status``, ``list`` and ``report.json``."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from typing import Any, TypedDict

from .._io import atomic_write_text
from ..costs.pricing import Pricing, load_pricing, usage_cost
from ..engine.rundir import Run, RunConfig
from ..engine.state import RunState
from ..kinds import STAGES, RunStatus, Stage
from ..scores.noise import noise_text, read_noise
from ..scores.summary_file import _ci, _num, read_summary


class CaseCounts(TypedDict):
    total: int
    scored: int
    errors: int
    pending: int


class BatchRecord(TypedDict):
    submission: str
    batch_id: str | None
    status: str
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
    cost: dict[str, Any]


class RunStatusRecord(_RunStatus, total=False):
    """Everything ``batchbench status`` shows (``--json`` prints it as is)."""

    overall_macro_mean: float
    overall_ci95: list[float]
    judge_noise: dict[str, Any]  # a run graded with --judge-passes K > 1, once done


class StageStatus(TypedDict):
    """One stage's progress, counted from collected results only."""

    done: int
    failed: int
    total: int
    batches: dict[str, int]  # batch status → how many
    running: list[str]  # "<submission> <status> <lines done>/<total>" for batches in flight
    usage: dict[str, int]  # tokens used so far, by kind


def stage_cost(state: RunState, stage: str, model: str, pricing: Pricing) -> dict[str, Any]:
    """Tokens used (from every collected output line's usage) and what they cost at the
    batch price; an unpriced model says why."""
    usage = dict(state.usage.get(stage, {}))
    price = pricing.price(model)
    out = {"model": model, **usage, **usage_cost(usage, price, pricing.batch_discount)}
    if price is None:
        out["no_price"] = pricing.why_unpriced(model)
    return out


def stage_status(state: RunState, stage: Stage) -> StageStatus:
    """One stage's progress and its batches, for ``status`` and report.json."""
    progress = state.progress(stage)
    batches: dict[str, int] = {}
    running: list[str] = []
    for sub in state.subs.values():
        if sub.stage != stage:
            continue
        batches[sub.status] = batches.get(sub.status, 0) + 1
        view = sub.view
        if sub.in_flight and view is not None and view.total:
            if view.processing is not None:  # a service that says nothing else until the end
                running.append(f"{sub.id} {sub.status} processing {view.processing}")
            else:
                done_lines = view.completed + view.failed
                running.append(f"{sub.id} {sub.status} {done_lines}/{view.total}")
    return StageStatus(
        done=progress.done,
        failed=progress.failed,
        total=progress.total,
        batches=batches,
        running=running,
        usage=dict(state.usage.get(stage, {})),
    )


def _costs(state: RunState, config: RunConfig, pricing: Pricing) -> dict[str, Any]:
    stages = {
        "answers": stage_cost(state, "answers", config.answer_model, pricing),
        "judges": stage_cost(state, "judges", config.judge_model, pricing),
    }
    both = [s["batch_usd"] for s in stages.values()]
    sync = [s["sync_usd"] for s in stages.values()]
    total = {
        "batch_usd": None if None in both else round(sum(both), 6),
        "sync_usd": None if None in sync else round(sum(sync), 6),
    }
    return {"stages": stages, "total": total, "pricing": pricing.source}


def cost_line(cost: dict[str, Any]) -> str:
    """``cost at batch price: answers $0.0123, judges $0.0456, total $0.0579 (sync $0.1158)``."""
    parts = [
        f"{stage} {_usd(c['batch_usd'])}"
        if c["batch_usd"] is not None
        else f"{stage}: no price for {c['model']} ({c.get('no_price', 'unknown')})"
        for stage, c in cost["stages"].items()
    ]
    total = cost["total"]
    if total["batch_usd"] is not None:
        parts.append(f"total {_usd(total['batch_usd'])} (sync {_usd(total['sync_usd'])})")
    return "cost at batch price: " + ", ".join(parts)


def run_status(run: Run, pricing: Pricing | None = None) -> RunStatusRecord:
    """Everything `batchbench status` shows, from the journal alone (no API call); costs
    at the built-in prices unless others are given."""
    pricing = pricing or load_pricing()
    config = run.load_config()
    state = run.state(config.case_ids)
    scored = sum(1 for c in state.cases.values() if c.final == "scored")
    errors = sum(1 for c in state.cases.values() if c.final == "error")
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
                "status": s.status,
                "requests": len(s.lines),
                "adopted": s.adopted,
            }
            for s in state.subs.values()
        ],
        "anomalies": list(state.anomalies),
        "losses": dict(state.losses),
        "stalled": state.stalls,
        "cost": _costs(state, config, pricing),
    }
    if run.summary_path.exists() or run.summary_path.is_symlink():
        summary = read_summary(run.summary_path)
        out["overall_macro_mean"] = summary["overall_macro_mean"]
        out["overall_ci95"] = summary["overall_ci95"]
    noise = read_noise(run)
    if noise is not None:
        out["judge_noise"] = noise
    return out


def error_cause(error: str) -> str:
    """An error row's cause, without its particulars: what errors are grouped by."""
    text = error.split(": ", 1)[1] if ": " in error else error
    gave_up = re.match(r"\w+ request failed after \d+ attempts: (.*)", text, re.S)
    if gave_up:
        return error_cause("Error: " + gave_up.group(1)) + " (retries spent)"
    for pattern in (
        r"(invalid judge JSON)",
        r"(judge item mismatch)",
        r"(duplicate judge decision)",
        r"(each judge decision needs .*)",
        r"(HTTP \d+)",
        r"(\w+): ",
    ):
        found = re.match(pattern, text)
        if found:
            return found.group(1)
    return text[:60]


def readable_error(error: str, limit: int = 200) -> str:
    """An error row's text for people: the service's own message when the error quotes
    an HTTP reply, without the exception's type; cut to ``limit`` characters."""
    text = error.split(": ", 1)[1] if re.match(r"\w+: ", error) else error
    found = re.search(r"HTTP (\d+): (\{.*\})", text, re.S)
    if found:
        try:
            body = json.loads(found.group(2))
            inner = body.get("error", body) if isinstance(body, dict) else body
            message = inner.get("message") if isinstance(inner, dict) else None
            if isinstance(message, str) and message:
                text = text[: found.start(2)] + message
        except ValueError:
            pass
    return text if len(text) <= limit else text[: limit - 1] + "…"


def errors_line(causes: dict[str, int]) -> str:
    """``27 failed: 20 × invalid judge JSON, 7 × HTTP 400``."""
    total = sum(causes.values())
    return f"{total} failed: " + ", ".join(f"{n} × {cause}" for cause, n in causes.items())


def _age(when: float | None, now: float) -> str:
    if when is None:
        return "nothing recorded yet"
    minutes = int(now - when) // 60
    ago = (
        "just now"
        if minutes < 1
        else f"{minutes} min ago"
        if minutes < 120
        else (f"{minutes // 60} h ago")
    )
    return f"as of {time.strftime('%H:%M', time.gmtime(when))} UTC, {ago}"


def status_text(status: RunStatusRecord, now: float | None = None) -> str:
    c = status["cases"]
    lines = [
        f"{status['run']}: {status['status']}  ({status['answer_model']} judged by"
        f" {status['judge_model']}; {_age(status['as_of'], now or time.time())})",
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
    if "overall_macro_mean" in status:
        lo, hi = status["overall_ci95"]
        lines.append(
            f"  overall macro mean {_num(status['overall_macro_mean'])}  95% CI {_ci([lo, hi])}"
        )
    if "judge_noise" in status:
        lines.append(f"  {noise_text(status['judge_noise'])}")
    cost = status.get("cost")
    if cost:
        for stage, c in cost["stages"].items():
            price = (
                f"cost {_usd(c['batch_usd'])} (sync {_usd(c['sync_usd'])})"
                if c["batch_usd"] is not None
                else f"no price for {c['model']} ({c.get('no_price', 'unknown')})"
            )
            lines.append(
                f"  {stage} usage: {c.get('requests', 0)} requests, {c.get('prompt_tokens', 0):,}"
                f" input ({c.get('cached_tokens', 0):,} cached), {c.get('completion_tokens', 0):,}"
                f" output ({c.get('reasoning_tokens', 0):,} reasoning) tokens; {price}"
            )
        if cost["total"]["batch_usd"] is not None:
            lines.append(
                f"  total cost {_usd(cost['total']['batch_usd'])} at batch price"
                f" (sync {_usd(cost['total']['sync_usd'])})"
            )
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
    if status.get("stalled"):
        lines.append(
            f"  {status['stalled']} batch(es) had not started after --resubmit-after: cancelled"
            " and their requests sent again (once)"
        )
    for anomaly in status["anomalies"]:
        lines.append(f"  anomaly: {anomaly}")
    return "\n".join(lines)


def _usd(value: Any) -> str:
    return "n/a" if value is None else f"${value:,.4f}"


def write_report(
    run: Run, state: RunState, config: RunConfig, pricing: Pricing | None = None
) -> None:
    """report.json: what the reference has no field for (counts, usage, cost, batches)."""
    pricing = pricing or load_pricing()
    report = {
        "run": config.name,
        "run_id": config.run_id,
        "stages": {stage: stage_status(state, stage) for stage in STAGES},
        "batches": [
            {
                "submission": s.id,
                "stage": s.stage,
                "batch_id": s.batch_id,
                "status": s.status,
                "requests": len(s.lines),
                "adopted": s.adopted,
                "input_file_id": s.file_id,
                "result_files": s.result_files(),
            }
            for s in state.subs.values()
        ],
        "anomalies": list(state.anomalies),
        "cost": _costs(state, config, pricing),
    }
    atomic_write_text(run.report_path, json.dumps(report, indent=2) + "\n")

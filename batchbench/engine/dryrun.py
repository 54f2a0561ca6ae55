"""DryRun before paying: every request file a run would submit, checked and priced, offline.

The answer stage is built exactly as a run builds it. The judge stage needs
answers that do not exist yet, so it is built from a placeholder answer of an
assumed length; its replies are estimated as the exact JSON a judge would
return for the case's items.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypedDict

from .. import providers
from ..bench.dataset import Case
from ..bench.grading import BEDSIDE, Grading
from ..costs.caching import Caching, caching
from ..costs.pricing import Pricing, cost, prompt_tokens, token_counter
from ..costs.rollup import priced_text
from ..formats import usd
from ..kinds import Stage
from ..providers.base import Wire
from ..providers.registry import BY_NAME
from .requests import Request, build_request, fit_minimum, shard
from .spend import worst_usd

DRY_RUN_ID = "0" * 32  # the run id a dry run's request ids are built with


class BelowMinimumPlan(TypedDict):
    minimum: int  # the service's fewest requests a batch may hold
    on_demand_usd: float | None  # what sending them on demand costs (the full price)


class _StagePlan(TypedDict):
    model: str
    provider: str
    requests: int
    files: int
    file_sizes: list[int]
    bytes: int
    input_tokens: int
    output_tokens: int
    tokenizer: str
    batch_discount: float  # the venue's, for this model
    discount_source: str  # where that figure was read
    priced: bool
    no_price: str | None  # why, when not priced
    batch_usd: float | None
    sync_usd: float | None
    worst_usd: float | None  # every request's whole output allowance: what --max-spend counts
    caching: Caching  # what prompt caching can read of its input


class StagePlan(_StagePlan, total=False):
    below_minimum: BelowMinimumPlan  # too few requests for one batch of this service


class PlanTotal(TypedDict):
    requests: int
    files: int
    bytes: int
    input_tokens: int
    output_tokens: int
    batch_usd: float | None
    sync_usd: float | None
    priced_batch_usd: float | None  # the priced stages' part (None: nothing priced)
    unpriced: list[str]  # "<model> <stage>" for each stage without a price


class MaxCost(TypedDict):
    usd: float
    refused_because: str | None


class _DryRun(TypedDict):
    cases: int
    assumed_answer_tokens: int
    pricing: str
    stages: dict[Stage, StagePlan]
    total: PlanTotal
    note: str


class DryRun(_DryRun, total=False):
    """A dry run's plan (``--dry-run --json`` prints it as is)."""

    max_cost: MaxCost


def _stage(
    name: Stage,
    wire: Wire,
    requests: list[Request],
    model: str,
    output_tokens: Callable[[Request], int],
    *,
    max_requests: int,
    max_bytes: int,
    max_tokens: int | None,
    pricing: Pricing,
) -> StagePlan:
    described, count = token_counter(model)
    lines = [r.line for r in requests]
    tokens = [prompt_tokens(r.prompt, count) for r in requests]
    most = wire.limits.max_lines
    cap = fit_minimum(len(lines), min(max_requests, most), wire.limits.min_lines, most)
    groups = shard(
        lines,
        cap,
        min(max_bytes, wire.limits.max_bytes),
        tokens=tokens,
        max_tokens=max_tokens,
    )
    for i, group in enumerate(groups, 1):
        wire.check_file([lines[j] for j in group], f"{name} file {i}")
    prompt = sum(tokens)
    output = sum(output_tokens(r) for r in requests)
    # each request sent how many times over (K judge passes; items of one grader are not)
    passes = len(requests) // max(1, len({r.prompt for r in requests}))
    price = pricing.price(model)
    off = pricing.discount(wire.name, model)
    priced = cost(price, prompt, 0, output, batch_discount=off.fraction)
    found: StagePlan = {
        "batch_usd": priced["batch_usd"],
        "sync_usd": priced["sync_usd"],
        "worst_usd": worst_usd(pricing, wire.name, model, name, prompt, len(requests)),
        "caching": caching(
            [r.prompt for r in requests],
            count,
            prompt,
            passes,
            venue=wire.name,
            terms=off,
            price=price,
            together=BY_NAME[wire.name].passes_together,
        ),
        "model": model,
        "provider": wire.name,
        "requests": len(requests),
        "files": len(groups),
        "file_sizes": [len(g) for g in groups],
        "bytes": sum(len(x) for x in lines),
        "input_tokens": prompt,
        "output_tokens": output,
        "tokenizer": described,
        "batch_discount": off.fraction,
        "discount_source": off.text(),
        "priced": price is not None,
        "no_price": None if price is not None else pricing.why_unpriced(model),
    }
    if len(requests) < wire.limits.min_lines:
        # Refused as a batch: sent only on demand, when asked, at the full price.
        found["below_minimum"] = {
            "minimum": wire.limits.min_lines,
            "on_demand_usd": priced["sync_usd"],
        }
    return found


def plan(
    cases: Sequence[Case],
    *,
    answer_model: str,
    judge_model: str,
    reasoning_effort: str | None,
    pricing: Pricing,
    max_requests: int = 50_000,
    max_bytes: int = 200 * 1024 * 1024,
    max_tokens: int | None = None,
    assumed_answer_tokens: int = 800,
    judge_passes: int = 1,
    borrowed: bool = False,
    grading: Grading = BEDSIDE,
) -> DryRun:
    """The full plan of a run: files, tokens and cost per stage, and the totals (the judge
    stage holds every one of the ``judge_passes``, or one request per rubric item where
    the grading asks so; a judge panel's other judge, whose answers are ``borrowed``, the
    judge stage only)."""
    wires: dict[Stage, Wire] = {
        "answers": providers.wire(providers.route(answer_model)),
        "judges": providers.wire(providers.judge_provider(judge_model)),
    }
    resolved = providers.resolve(answer_model)
    answers = [
        build_request(
            wires["answers"],
            "answers",
            c,
            resolved,
            1,
            DRY_RUN_ID,
            reasoning_effort=reasoning_effort,
            grading=grading,
        )
        for c in cases
    ]
    parts = {c["case_id"]: max(judge_passes, grading.parts(c)) for c in cases}
    placeholder = ("answer " * assumed_answer_tokens).strip()
    judges = [
        build_request(
            wires["judges"],
            "judges",
            c,
            providers.resolve(judge_model),
            1,
            DRY_RUN_ID,
            answer=placeholder,
            judge_pass=p,
            grading=grading,
        )
        for p in range(1, max(parts.values(), default=1) + 1)
        for c in cases
        if p <= parts[c["case_id"]]
    ]
    by_id = {c["case_id"]: c for c in cases}
    _, judge_count = token_counter(judge_model)

    def judge_reply_tokens(r: Request) -> int:
        return judge_count(grading.judge_reply(by_id[r.case_id], 1))

    work: dict[Stage, tuple[list[Request], str, Callable[[Request], int]]] = {
        "answers": (answers, answer_model, lambda r: assumed_answer_tokens),
        "judges": (judges, judge_model, judge_reply_tokens),
    }
    if borrowed:  # the panel's first run buys the answers
        del work["answers"]
    stages = {
        stage: _stage(
            stage,
            wires[stage],
            requests,
            model,
            replies,
            max_requests=max_requests,
            max_bytes=max_bytes,
            max_tokens=max_tokens,
            pricing=pricing,
        )
        for stage, (requests, model, replies) in work.items()
    }
    total = _total(stages)
    return {
        "cases": len(cases),
        "assumed_answer_tokens": assumed_answer_tokens,
        "pricing": pricing.source,
        "stages": stages,
        "total": total,
        "note": "judge inputs assume answers of the assumed length; reasoning tokens are"
        " billed as output and are not estimated",
    }


def _total(stages: Mapping[Stage, StagePlan]) -> PlanTotal:
    """The stages summed; a price only when every stage is priced (``priced_batch_usd``:
    what the priced stages alone come to)."""
    priced = all(s["priced"] for s in stages.values())
    parts = list(stages.values())
    return PlanTotal(
        requests=sum(s["requests"] for s in parts),
        files=sum(s["files"] for s in parts),
        bytes=sum(s["bytes"] for s in parts),
        input_tokens=sum(s["input_tokens"] for s in parts),
        output_tokens=sum(s["output_tokens"] for s in parts),
        batch_usd=round(sum(s["batch_usd"] or 0 for s in parts), 6) if priced else None,
        sync_usd=round(sum(s["sync_usd"] or 0 for s in parts), 6) if priced else None,
        priced_batch_usd=round(sum(s["batch_usd"] or 0 for s in parts), 6)
        if any(s["priced"] for s in parts)
        else None,
        unpriced=[f"{s['model']} {name}" for name, s in stages.items() if not s["priced"]],
    )


def _files(sizes: Sequence[int]) -> str:
    """``1 file of 250 requests``, ``3 files of 100, 100 and 50 requests``."""
    if len(sizes) == 1:
        return f"1 file of {sizes[0]:,} requests"
    head = ", ".join(f"{n:,}" for n in sizes[:-1])
    return f"{len(sizes)} files of {head} and {sizes[-1]:,} requests"


def grand_total(plans: Sequence[DryRun]) -> str:
    """The last line of a dry run of several models: what the whole command would cost
    (the priced part, and what is not priced named)."""
    requests = sum(p["total"]["requests"] for p in plans)
    head = f"all {len(plans)} runs: {requests:,} requests"
    unpriced = list(dict.fromkeys(u for p in plans for u in p["total"]["unpriced"]))
    parts = [p["total"]["priced_batch_usd"] for p in plans]
    priced = None if all(c is None for c in parts) else sum(c or 0.0 for c in parts)
    if unpriced:
        return f"{head}, {priced_text(priced, unpriced)} at batch price"
    sync = sum(p["total"]["sync_usd"] or 0.0 for p in plans)
    return f"{head}, {usd(priced)} at batch price (sync {usd(sync)})"


def plan_text(p: DryRun) -> str:
    lines = [f"dry run: {p['cases']} cases; prices from {p['pricing']}"]
    header = (
        f"{'stage':<8} {'requests':>8} {'files':>5} {'MB':>8} {'input tok':>11}"
        f" {'output tok':>11} {'batch':>12} {'sync':>12}"
    )
    lines.append(header)
    for name, s in [*p["stages"].items(), ("total", p["total"])]:
        lines.append(
            f"{name:<8} {s['requests']:>8} {s['files']:>5} {s['bytes'] / 1e6:>8.2f}"
            f" {s['input_tokens']:>11,} {s['output_tokens']:>11,} {usd(s['batch_usd']):>12}"
            f" {usd(s['sync_usd']):>12}"
        )
    for name, s in p["stages"].items():
        lines.append(
            f"{name}: {s['model']} ({s['provider']}), {_files(s['file_sizes'])},"
            f" tokens by {s['tokenizer']}; {s['discount_source']}"
            + ("" if s["priced"] else f"; no price for {s['model']}: {s.get('no_price')}")
        )
        lines.append(f"{name}: caching: {s['caching']['note']}")
        below = s.get("below_minimum")
        if below is not None:
            lines.append(
                f"warning: {name}: {s['requests']} requests, fewer than the"
                f" {below['minimum']} a {s['provider']} batch job needs: the live run would"
                " stop before sending them (the service refuses such a job);"
                f" --on-demand-remainder sends them on demand for {usd(below['on_demand_usd'])}"
                " (the full price)"
            )
    worst = [s["worst_usd"] for s in p["stages"].values()]
    if all(w is not None for w in worst):  # what --max-spend would hold the run to
        lines.append(
            f"at worst {usd(sum(w or 0.0 for w in worst))}: every request billed its whole"
            " output allowance (what --max-spend counts a batch as, until its results are in)"
        )
    if p["total"]["unpriced"]:
        total = p["total"]
        lines.append(
            f"total at batch price: {priced_text(total['priced_batch_usd'], total['unpriced'])}"
        )
    if "max_cost" in p:
        why = p["max_cost"]["refused_because"]
        lines.append(
            f"--max-cost ${p['max_cost']['usd']:,.4f}: the run would be refused ({why})"
            if why
            else f"--max-cost ${p['max_cost']['usd']:,.4f}: the run fits; it would be submitted"
        )
    lines.append(f"note: {p['note']} (answers assumed {p['assumed_answer_tokens']} tokens)")
    return "\n".join(lines)

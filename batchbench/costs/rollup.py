"""What a run's recorded usage cost, per stage and in all, at the batch price.

A stage whose model has no price does not hide what is priced: the total says
the priced part and names what is not (``$12.08 + glm-5.3 answers (unpriced)``).
The record is plain data (``status --json``, ``report.json``, ``list``); the
texts here are the only ones that word a run's cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from ..formats import usd
from ..kinds import Stage
from .discounts import CacheTerms, Discount
from .pricing import Price, Pricing, usage_cost


class _StageCost(TypedDict):
    model: str
    batch_usd: float | None
    sync_usd: float | None


class StageCost(_StageCost, total=False):
    """One stage's usage (tokens by kind, requests) and cost; ``no_price`` says why not."""

    requests: int
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    cache_write_5m_tokens: int
    cache_write_1h_tokens: int
    no_price: str
    cache_note: str  # cached input priced as uncached, and why
    list_price_usd: float  # of batch_usd, what calls at the list price cost (a deadline's)


class TotalCost(TypedDict):
    batch_usd: float | None  # every stage priced, else None
    sync_usd: float | None
    priced_batch_usd: float | None  # what is priced, whatever is not (None: nothing is)
    priced_sync_usd: float | None
    unpriced: list[str]  # "<model> <stage>" for each stage without a price


class RunCost(TypedDict):
    stages: dict[str, StageCost]
    total: TotalCost
    pricing: str


# What calls at the list price are billed: no batch discount, the cache read as the
# synchronous API reads it.
LIST_PRICE = Discount(0.0, "the list price", cache=CacheTerms("stacks", "the synchronous API"))


def _bill(
    used: Mapping[str, int], listed: Mapping[str, int], price: Price | None, terms: Discount
) -> dict[str, Any]:
    """A stage's cost: its usage at the venue's batch terms, but what was sent on demand
    at the list price (``listed``: that part of ``used``) at the list price."""
    batched = {k: v - listed.get(k, 0) for k, v in used.items()}
    bill = usage_cost(batched, price, terms)
    if not listed or price is None:
        return bill
    extra = usage_cost(listed, price, LIST_PRICE)
    for key in ("batch_usd", "sync_usd"):
        bill[key] = round(bill[key] + extra[key], 6)
    bill["list_price_usd"] = extra["batch_usd"]
    return bill


def run_cost(
    usage: Mapping[str, Mapping[str, int]],
    models: Mapping[Stage, str],
    pricing: Pricing,
    providers: Mapping[Stage, str],
    listed: Mapping[str, Mapping[str, int]] | None = None,
) -> RunCost:
    """The cost of each stage's usage (``models``: stage → the model it ran on;
    ``providers``: stage → the venue, whose batch discount it got; ``listed``: of the
    usage, what calls at the list price used)."""
    stages: dict[str, StageCost] = {}
    for stage, model in models.items():
        used = dict(usage.get(stage, {}))
        price = pricing.price(model)
        terms = pricing.discount(providers[stage], model)
        bill = _bill(used, (listed or {}).get(stage, {}), price, terms)
        uncached = bill.pop("uncached", 0)
        one = StageCost(model=model, **bill)  # type: ignore[typeddict-item]
        one.update(used)
        why = terms.cache.uncached_why(providers[stage])
        if uncached and why:
            one["cache_note"] = f"{uncached:,} cached input tokens priced as uncached: {why}"
        if price is None and not any(used.values()):  # nothing bought: nothing to price
            one["batch_usd"] = one["sync_usd"] = 0.0  # (the dataset's own answers, say)
        elif price is None:
            one["no_price"] = pricing.why_unpriced(model)
        stages[stage] = one
    priced = [s for s in stages.values() if s["batch_usd"] is not None]
    unpriced = [f"{s['model']} {stage}" for stage, s in stages.items() if s["batch_usd"] is None]
    batch = round(sum(s["batch_usd"] or 0.0 for s in priced), 6)
    sync = round(sum(s["sync_usd"] or 0.0 for s in priced), 6)
    total = TotalCost(
        batch_usd=None if unpriced else batch,
        sync_usd=None if unpriced else sync,
        priced_batch_usd=batch if priced else None,
        priced_sync_usd=sync if priced else None,
        unpriced=unpriced,
    )
    return RunCost(stages=stages, total=total, pricing=pricing.source)


def priced_text(batch: float | None, unpriced: list[str], digits: int = 4) -> str:
    """``$12.0800``, ``$12.0800 + glm-5.3 answers (unpriced)``, or the unpriced alone
    (``batch`` None: nothing is priced)."""
    if not unpriced:
        return usd(batch, digits)
    named = " + ".join(unpriced) + " (unpriced)"
    return named if batch is None else f"{usd(batch, digits)} + {named}"


def total_text(cost: RunCost, digits: int = 4) -> str:
    """The run's total at batch price, its priced part when a stage is unpriced."""
    total = cost["total"]
    return priced_text(total["priced_batch_usd"], total["unpriced"], digits)


def usage_text(stage: StageCost) -> str:
    """``250 requests, 1,234,567 input (0 cached), 98,765 output (12,000 reasoning) tokens``;
    cache writes, where there are any, beside the cached (``2,048 written to cache``)."""
    written = stage.get("cache_write_5m_tokens", 0) + stage.get("cache_write_1h_tokens", 0)
    writes = f", {written:,} written to cache" if written else ""
    return (
        f"{stage.get('requests', 0):,} requests, {stage.get('prompt_tokens', 0):,} input"
        f" ({stage.get('cached_tokens', 0):,} cached{writes}),"
        f" {stage.get('completion_tokens', 0):,}"
        f" output ({stage.get('reasoning_tokens', 0):,} reasoning) tokens"
    )


def stage_price_text(stage: StageCost) -> str:
    """``cost $0.0123 (sync $0.0246)`` or ``no price for m (why)``."""
    if stage["batch_usd"] is None:
        return f"no price for {stage['model']} ({stage.get('no_price', 'unknown')})"
    note = f"; {stage['cache_note']}" if "cache_note" in stage else ""
    if "list_price_usd" in stage:
        note += f"; of it {usd(stage['list_price_usd'])} at the list price (--allow-list-price)"
    return f"cost {usd(stage['batch_usd'])} (sync {usd(stage['sync_usd'])}){note}"


def cost_line(cost: RunCost) -> str:
    """``cost at batch price: answers $0.0123, judges $0.0456, total $0.0579 (sync $0.1158)``;
    an unpriced stage is named, and the total is the priced part plus what is not."""
    parts = [
        f"{stage} {usd(c['batch_usd'])}"
        if c["batch_usd"] is not None
        else f"{stage}: no price for {c['model']} ({c.get('no_price', 'unknown')})"
        for stage, c in cost["stages"].items()
    ]
    total = cost["total"]
    if total["batch_usd"] is not None:
        parts.append(f"total {usd(total['batch_usd'])} (sync {usd(total['sync_usd'])})")
    else:
        parts.append(f"total {total_text(cost)}")
    return "cost at batch price: " + ", ".join(parts)

"""How many cases, and how many dollars, a comparison needs: ``batchbench plan``.

Two finished runs are the pilot. Their paired differences give each
benchmark's standard deviation ``sd_b``; the macro difference over K
benchmarks of m cases each then has the standard error ``sqrt(sum sd_b^2 / m) / K``,
so detecting ``mde`` with the asked power at a two-sided ``alpha`` takes
``m = ceil(((z(1 - alpha/2) + z(power)) / mde)^2 * sum sd_b^2 / K^2)`` cases per
benchmark (:func:`batchbench.scores.stats.cases_needed`). The price is the pilots'
own: each run's actual batch cost per case, for both models, times the cases.
"""

from __future__ import annotations

import math
from typing import Any

from ..costs.pricing import load_pricing
from ..costs.rollup import run_cost
from ..errors import ConfigError, InvariantError
from . import stats
from .compare import Side, check_overlap, check_together
from .sources import Named


def _cost_per_case(named: Named) -> float | None:
    """A run's actual batch cost over its cases (None for a results file, or unpriced)."""
    if named.run is None:
        return None
    config = named.run.load_config()
    state = named.run.state(config.case_ids)
    usd = run_cost(state.usage, config.models, load_pricing(), config.providers)["total"][
        "batch_usd"
    ]
    return None if usd is None else usd / len(state.cases)


def check_targets(mde: float, power: float, alpha: float) -> None:
    """The plan's options, checked before any pilot is read."""
    if not (0 < mde <= 1):
        raise ConfigError(
            f"--mde {mde:g} must be a difference in (0, 1]: scores lie between 0 and 1"
        )
    for option, value in (("--power", power), ("--alpha", alpha)):
        if not 0 < value < 1:
            raise ConfigError(f"{option} {value} must lie strictly between 0 and 1")
    if power <= alpha / 2:  # else z(1 - alpha/2) + z(power) <= 0 and the formula means nothing
        raise ConfigError(f"--power {power} must exceed half of --alpha {alpha}")


def plan(
    pilot: tuple[tuple[Named, Side], tuple[Named, Side]],
    mde: float,
    power: float = 0.8,
    alpha: float = 0.05,
    *,
    allow_partial: bool = False,
) -> dict[str, Any]:
    """Cases per benchmark, in total, and their estimated price, for a target MDE."""
    check_targets(mde, power, alpha)
    (named_a, a), (named_b, b) = pilot
    check_together([a, b])
    both = check_overlap(a, b, allow_partial)
    by_benchmark: dict[str, list[float]] = {}
    for case_id in both:
        by_benchmark.setdefault(a.benchmark_of[case_id], []).append(
            a.scores[case_id] - b.scores[case_id]
        )
    # The plan is for every benchmark of the dataset: a pilot that leaves one out (or
    # gives it under two paired cases, so no spread) cannot speak for it.
    planned = sorted(set(a.benchmark_of.values()))
    thin = [
        f"{n} ({len(by_benchmark.get(n, []))})" for n in planned if len(by_benchmark.get(n, [])) < 2
    ]
    if thin:
        raise ConfigError(
            f"the pilot must cover every benchmark it plans for with at least 2 cases scored"
            f" by both runs; it has fewer in {len(thin)} of {len(planned)}: {', '.join(thin)}"
        )
    sds: dict[str, float] = {}
    for name in planned:
        sd = stats.sd(by_benchmark[name])
        if sd is None:  # two cases or more, checked above
            raise InvariantError(f"benchmark {name!r} has no spread after the pilot check")
        sds[name] = sd
    try:
        m = stats.cases_needed(list(sds.values()), mde, power, alpha)
    except OverflowError:
        raise ConfigError(
            f"--mde {mde} needs more cases than can be counted: ask for a larger difference"
        ) from None
    total = m * len(sds)
    costs = [_cost_per_case(named_a), _cost_per_case(named_b)]
    usd = None if None in costs else total * math.fsum(c for c in costs if c is not None)
    available = {n: sum(1 for v in a.benchmark_of.values() if v == n) for n in sds}
    return {
        "pilot": [a.name, b.name],
        "mde": mde,
        "power": power,
        "alpha": alpha,
        "benchmarks": len(sds),
        "sd_diff": sds,
        "cases_per_benchmark": m,
        "total_cases": total,
        "estimated_usd": usd,
        "cost_per_case_usd": dict(zip([a.name, b.name], costs)),
        "dataset_cases_per_benchmark": available,
    }


def plan_text(result: dict[str, Any]) -> str:
    a, b = result["pilot"]
    usd = result["estimated_usd"]
    price = (
        f"about ${usd:,.2f} to grade both models on them, at the pilots' batch cost per case"
        if usd is not None
        else "the cost is unknown (a pilot without a price)"
    )
    lines = [
        f"pilot: {a} vs {b}, {result['benchmarks']} benchmarks",
        f"to detect a macro difference of {result['mde']:g} with {result['power']:.0%} power"
        f" at a two-sided {result['alpha']:g} level:",
        f"  {result['cases_per_benchmark']:,} cases per benchmark, {result['total_cases']:,}"
        f" in all; {price}",
    ]
    need = result["cases_per_benchmark"]
    short = [
        f"{have:,} in {n}"
        for n, have in result["dataset_cases_per_benchmark"].items()
        if have < need
    ]
    if short:
        lines.append(
            f"  that exceeds the dataset: it needs {need:,} cases per benchmark, and the"
            f" dataset has {', '.join(short)}"
        )
    lines.append("  (case sampling only: answer and judge sampling add to it)")
    return "\n".join(lines)

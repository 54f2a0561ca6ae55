"""How long the answers are (#66.5), and the length-adjusted score as an option.

A judge may favour long answers; a reader should see the lengths beside the scores.
Per run: the distribution of the scored answers' lengths in characters (quartiles, the
10th and 90th percentiles, by the nearest-rank rule). The length-adjusted score is the
rule the issue states from HealthBench Professional: each case's score less 0.0147 for
every 500 characters its answer runs beyond 2,000 (nothing for a shorter one), averaged
over the scored cases — always shown beside the raw mean, never instead of it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

CENTRE = 2000  # characters an answer may run before the adjustment starts
PENALTY = 0.0147  # per 500 characters beyond the centre
STEP = 500
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def nearest_rank(ordered: Sequence[int], q: float) -> int:
    """The ``q`` quantile of sorted values by the nearest-rank rule (a value observed)."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def adjusted(score: float, characters: int) -> float:
    return score - PENALTY * max(0, characters - CENTRE) / STEP


def length_record(rows: Mapping[str, Mapping[str, Any]], with_adjusted: bool) -> dict[str, Any]:
    """One run's answer lengths (scored cases), and its length-adjusted mean if asked."""
    scored = [
        (len(str(r["answer"])), float(r["score"]))
        for r in rows.values()
        if "error" not in r and isinstance(r.get("answer"), str) and "score" in r
    ]
    lengths = sorted(n for n, _ in scored)
    found: dict[str, Any] = {
        "answers": len(lengths),
        "quantiles": {f"p{round(q * 100)}": nearest_rank(lengths, q) for q in QUANTILES}
        if lengths
        else {},
        "over_centre": sum(1 for n in lengths if n > CENTRE),
    }
    if with_adjusted:
        found["raw_mean"] = sum(s for _, s in scored) / len(scored) if scored else None
        found["adjusted_mean"] = (
            sum(adjusted(s, n) for n, s in scored) / len(scored) if scored else None
        )
        found["rule"] = (
            f"each score less {PENALTY} per {STEP} characters beyond {CENTRE:,}, averaged"
        )
    return found

"""Endorsed harm: how often a model's answer met a rubric item carrying negative points.

A rubric item with negative points is a statement the answer must not make (a wrong
dose, a dangerous reassurance); the judge marking it met means the answer made it. The
score folds these into a mean; a clinical reviewer asks for them apart (#66.4): per
model, the share of scored cases with at least one endorsed harm and the share of
negative items endorsed, each with a Wilson score interval (the items' interval treats
items as independent, though items of one case are not: it is narrower than it should
be, and said so); between two models, the paired difference in the share of cases with
harm, over the cases both scored, with Newcombe's hybrid score interval for paired
proportions (Newcombe 1998, method 10, without continuity correction); and the cases
with the most harm points endorsed. Every negative-points item of a scored case is one
row of :attr:`Harm.items`. Computed from the rows' decisions and the dataset's points,
nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..bench.dataset import Case
from ..bench.results import row_verdicts

Z95 = 1.959963984540054  # the standard normal's 97.5th percentile
WORST = 10  # cases shown as the worst


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for ``k`` of ``n`` (``(0, 1)`` for ``n = 0``)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    denominator = 1 + z * z / n
    return max(0.0, (centre - half) / denominator), min(1.0, (centre + half) / denominator)


@dataclass
class Harm:
    """One run's endorsed harm."""

    cases: int  # scored cases holding at least one negative-points item
    cases_with_harm: int
    items: list[dict[str, Any]] = field(default_factory=list)  # one a negative item
    worst: list[dict[str, Any]] = field(default_factory=list)  # most harm points, first

    @property
    def endorsed(self) -> int:
        return sum(1 for it in self.items if it["endorsed"])

    def record(self) -> dict[str, Any]:
        """As plain data (``report --json``)."""
        return {
            "cases": self.cases,
            "cases_with_harm": self.cases_with_harm,
            "case_rate": self.cases_with_harm / self.cases if self.cases else None,
            "case_ci": list(wilson(self.cases_with_harm, self.cases)),
            "negative_items": len(self.items),
            "items_endorsed": self.endorsed,
            "item_rate": self.endorsed / len(self.items) if self.items else None,
            "item_ci": list(wilson(self.endorsed, len(self.items))),
            "item_ci_note": "items treated as independent: too narrow where a case's items"
            " go together",
            "worst": self.worst,
            "items": self.items,
        }


def _harmed(row: Mapping[str, Any], case: Case) -> list[dict[str, Any]] | None:
    """The case's negative items, each endorsed or not (None: the row is not scored)."""
    if "error" in row:
        return None
    verdicts = row_verdicts(row.get("decisions"))
    if verdicts is None:
        return None
    return [
        {
            "case_id": case["case_id"],
            "item_id": it["item_id"],
            "points": it["points"],
            "text": it["text"],
            "endorsed": bool(verdicts.get(it["item_id"], False)),
        }
        for it in case["rubric_items"]
        if it["points"] < 0
    ]


def harm_of(rows: Mapping[str, Mapping[str, Any]], cases: Mapping[str, Case]) -> Harm:
    """A run's endorsed harm from its last row of each case."""
    harm = Harm(0, 0)
    burden: list[tuple[float, int, str]] = []  # (harm points, items, case)
    for case_id, row in rows.items():
        found = _harmed(row, cases[case_id])
        if not found:
            continue  # not scored, or no item to endorse
        harm.cases += 1
        harm.items += found
        endorsed = [it for it in found if it["endorsed"]]
        if endorsed:
            harm.cases_with_harm += 1
            points = -sum(float(it["points"]) for it in endorsed)
            burden.append((points, len(endorsed), case_id))
    burden.sort(key=lambda c: (-c[0], -c[1], c[2]))
    harm.worst = [
        {"case_id": cid, "harm_points": points, "items": n} for points, n, cid in burden[:WORST]
    ]
    return harm


def _has_harm(row: Mapping[str, Any], case: Case) -> bool | None:
    found = _harmed(row, case)
    if not found:
        return None
    return any(it["endorsed"] for it in found)


def paired_difference(
    a: Mapping[str, Mapping[str, Any]],
    b: Mapping[str, Mapping[str, Any]],
    cases: Mapping[str, Case],
    z: float = Z95,
) -> dict[str, Any]:
    """``a``'s share of cases with harm minus ``b``'s, over the cases both scored (that
    hold a negative item), with Newcombe's paired interval (method 10)."""
    pairs: list[tuple[bool, bool]] = []
    for case_id in sorted(set(a) & set(b)):
        x, y = _has_harm(a[case_id], cases[case_id]), _has_harm(b[case_id], cases[case_id])
        if x is not None and y is not None:
            pairs.append((x, y))
    n = len(pairs)
    both = sum(1 for x, y in pairs if x and y)
    only_a = sum(1 for x, y in pairs if x and not y)
    only_b = sum(1 for x, y in pairs if y and not x)
    neither = n - both - only_a - only_b
    if n == 0:
        return {"n": 0, "difference": None, "ci": [None, None], "only_a": 0, "only_b": 0}
    p1, p2 = (both + only_a) / n, (both + only_b) / n
    l1, u1 = wilson(both + only_a, n, z)
    l2, u2 = wilson(both + only_b, n, z)
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    phi = (both * neither - only_a * only_b) / math.sqrt(margins) if margins else 0.0
    d = p1 - p2
    low = d - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = d + math.sqrt(
        max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    )
    return {
        "n": n,
        "difference": d,
        "ci": [max(-1.0, low), min(1.0, high)],
        "only_a": only_a,
        "only_b": only_b,
        "method": "Newcombe (1998) method 10, paired, no continuity correction",
    }


def harm_record(
    names: Sequence[str],
    rows: Sequence[Mapping[str, Mapping[str, Any]]],
    cases: Mapping[str, Case],
) -> dict[str, Any]:
    """Every run's harm, and each later run's paired difference against the first."""
    runs = {name: harm_of(r, cases).record() for name, r in zip(names, rows)}
    differences = {
        f"{name} - {names[0]}": paired_difference(r, rows[0], cases)
        for name, r in zip(names[1:], rows[1:])
    }
    return {"runs": runs, "differences": differences}

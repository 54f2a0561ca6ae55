"""The flow of cases (#66.3), as CONSORT and STARD draw it: how many cases the dataset
held, how many the run selected, sent, got answered, got judged and scored — and at
each step, how many left and why (grouped by cause). From the run's journal (its
folded state) where there is one; from the rows alone for a results file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ..bench.causes import error_cause
from ..engine.state import RunState

STEPS = ("in the dataset", "selected", "sent", "answered", "judged", "scored")


UNSELECTED = "not selected (--smoke, --limit, --benchmark)"


def _gap(why: str, n: int) -> dict[str, int]:
    return {why: n} if n > 0 else {}


def _step(name: str, n: int, left: Mapping[str, int] | None = None) -> dict[str, Any]:
    return {"step": name, "cases": n, "excluded": dict(sorted((left or {}).items()))}


def flow_of_run(state: RunState, case_ids: Sequence[str], in_dataset: int) -> list[dict[str, Any]]:
    """Each step's cases and, between it and the next, who left and why."""
    cases = [state.cases[c] for c in case_ids]
    sent = [c for c in cases if c.answers.attempt > 0 or c.answers.status == "ok"]
    answered = [c for c in sent if c.answers.status == "ok"]
    judged = [c for c in answered if c.judges.status == "ok"]
    scored = [c for c in judged if c.final == "scored"]

    def why(group: Sequence[Any], stage: str) -> Counter[str]:
        found: Counter[str] = Counter()
        for c in group:
            st = c.answers if stage == "answers" else c.judges
            if st.status == "failed" and c.error:
                found[error_cause(c.error)] += 1
            elif st.status == "failed":
                found["failed"] += 1
            else:
                found["still in progress"] += 1
        return found

    answered_ids = {c.case_id for c in answered}
    judged_ids = {c.case_id for c in judged}
    not_answered = [c for c in sent if c.case_id not in answered_ids]
    not_judged = [c for c in answered if c.case_id not in judged_ids]
    return [
        _step(STEPS[0], in_dataset, _gap(UNSELECTED, in_dataset - len(cases))),
        _step(STEPS[1], len(cases), _gap("not sent yet", len(cases) - len(sent))),
        _step(STEPS[2], len(sent), why(not_answered, "answers")),
        _step(STEPS[3], len(answered), why(not_judged, "judges")),
        _step(STEPS[4], len(judged), _gap("not scored yet", len(judged) - len(scored))),
        _step(STEPS[5], len(scored)),
    ]


def flow_of_rows(rows: Mapping[str, Mapping[str, Any]], in_dataset: int) -> list[dict[str, Any]]:
    """A results file's flow: its rows only (which stage failed is not recorded there)."""
    failed = Counter(error_cause(str(r["error"])) for r in rows.values() if "error" in r)
    scored = sum(1 for r in rows.values() if "error" not in r)
    return [
        _step(
            STEPS[0],
            in_dataset,
            {"no row in the file": in_dataset - len(rows)} if in_dataset > len(rows) else None,
        ),
        _step("with a row", len(rows), failed),
        _step(STEPS[5], scored),
    ]

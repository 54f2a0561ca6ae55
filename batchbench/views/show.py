"""Answers at a glance: one case of a run in full, and runs' rows as a table.

``show`` reads everything a case went through from the run folder alone: the
case from the run's dataset, its rows, and each attempt from the journal with
the raw reply kept in ``raw/``. ``export`` turns result rows (a run's, or any
reference-format file's) into one polars frame for parquet or CSV.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

from ..bench.dataset import Case
from ..bench.results import read_rows
from ..engine.event_records import CaseOutcome, Line
from ..engine.events import Collected, Plan
from ..engine.replies import read_replies
from ..engine.rundir import Run
from ..errors import ConfigError, NotFinished, RunStateError
from ..scores.sources import not_finished, run_dataset


def _case(run: Run, case_id: str, dataset: Path | None) -> Case:
    config = run.load_config()
    if case_id not in config.case_ids:
        raise ConfigError(f"run {run.name!r} has no case {case_id!r}")
    return run_dataset(config, dataset).by_id()[case_id]


def _attempts(run: Run, case_id: str) -> list[str]:
    """Every request of the case, in order: stage, attempt, outcome, and the raw reply."""
    config = run.load_config()
    replies = read_replies(run, config, run.state(config.case_ids))
    per_item = config.grading.per_item  # a grader asked once per rubric item (HealthBench)
    plans: dict[str, Plan] = {}
    lines: list[str] = []
    for event in run.events():
        if isinstance(event, Plan):
            plans[event.sub] = event
        elif isinstance(event, Collected):
            for outcome, line, plan in _of_case(run, event, plans.get(event.sub), case_id):
                detail = f": {outcome.detail}" if outcome.detail else ""
                stage: str = plan.stage
                part = line.judge_pass or plan.judge_pass
                if plan.stage == "judges" and (per_item or part > 1):
                    stage += f" item_{part - 1}" if per_item else f" pass {part}"
                lines.append(f"  {stage} #{line.attempt} ({event.sub}): {outcome.kind}{detail}")
                reply = replies.get(line.id(plan.stage))
                if reply is not None and (outcome.kind != "ok" or plan.stage == "judges"):
                    lines.append(f"    reply: {visible(reply[:800])}")
    return lines


def _of_case(
    run: Run, event: Collected, plan: Plan | None, case_id: str
) -> list[tuple[CaseOutcome, Line, Plan]]:
    """The case's outcomes in a collection, each with its planned line: keyed by case or,
    in a submission of several judge passes, by request id (one a pass)."""
    if plan is not None and any(line.judge_pass for line in plan.lines):
        ids = {line.id(plan.stage): line for line in plan.lines if line.case_id == case_id}
        return [(o, ids[o.custom_id], plan) for o in event.outcomes.values() if o.custom_id in ids]
    if case_id not in event.outcomes:
        return []
    line = next((x for x in plan.lines if x.case_id == case_id), None) if plan else None
    if plan is None or line is None:
        raise RunStateError(
            f"{run.journal_path}: submission {event.sub!r} was collected for case"
            f" {case_id} but never planned for it (a damaged journal)"
        )
    return [(event.outcomes[case_id], line, plan)]


def visible(text: object) -> str:
    """Text as a terminal should show it: control characters (escapes, BEL, NUL…) written
    as ``\\x1b``-style escapes, never sent raw; a value that is not text as its JSON."""
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False)
    return "".join(
        c if c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cf", "Cs") else _escape(c)
        for c in text
    )


def _escape(c: str) -> str:
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def _verdicts(case: Case, row: dict[str, Any]) -> dict[object, object]:
    """Each rubric item's verdict in a row: its decisions by item id, or (HealthBench)
    its rubric items' ``criteria_met`` in the rubric's order."""
    decisions = row.get("decisions")
    if isinstance(decisions, list):
        return {d.get("item_id"): d.get("matched") for d in decisions if isinstance(d, dict)}
    items = row.get("rubric_items")
    if "criteria_met" in row:  # a meta-eval line: its one item's verdict
        items = [{"criteria_met": row["criteria_met"]}]
    if not isinstance(items, list):
        return {}
    ids = [it["item_id"] for it in case["rubric_items"]]
    return {i: g.get("criteria_met") for i, g in zip(ids, items) if isinstance(g, dict)}


def show_case(run: Run, case_id: str, dataset: Path | None = None) -> str:
    """The case, its answer, each rubric item with its points and verdict, its score, and
    every attempt it took (with the error and the raw reply of those that failed)."""
    if not run.results_path.exists():
        raise NotFinished(not_finished(run))
    case = _case(run, case_id, dataset)
    rows = (
        [r for r in read_rows(run.results_path) if r["case_id"] == case_id]
        if (run.results_path.exists())
        else []
    )
    last = rows[-1] if rows else None
    verdicts = _verdicts(case, last or {})
    if last is None:
        outcome = "not finished yet"
    elif "error" in last:
        outcome = f"error: {last['error']}"
    elif "score_components" in last:
        outcome = f"score {last['score']}  {json.dumps(last.get('score_components'))}"
    else:  # HealthBench: simple-evals' score (achieved over positive points)
        outcome = f"score {last['score']}"
    answer = (last or {}).get("answer")
    completion = (last or {}).get("completion")
    if answer is None and isinstance(completion, list):  # HealthBench: the completion
        answer = "".join(str(m.get("content", "")) for m in completion)
    elif answer is None and isinstance(completion, str):  # its meta-eval's: as given
        answer = completion
    out = [
        f"case {case_id}  ({case['benchmark']}, {case['grading_method']})",
        f"  {visible(outcome)}",
        "PROMPT",
        *(f"  {line}" for line in visible(case["prompt"]).splitlines()),
        "ANSWER",
        *(
            f"  {line}"
            for line in (visible(answer) if answer is not None else "(none)").splitlines()
        ),
        "RUBRIC  (x matched, . not matched, ? not judged)",
    ]
    graded = (last or {}).get("rubric_items")
    graded = graded if isinstance(graded, list) else []
    why = [g.get("explanation", g.get("error")) if isinstance(g, dict) else None for g in graded]
    for n, item in enumerate(case["rubric_items"]):
        verdict = verdicts.get(item["item_id"])
        mark = "x" if verdict is True else "." if verdict is False else "?"
        out.append(f"  [{mark}] {item['points']:+g}  {visible(item['text'])}  ({item['item_id']})")
        if n < len(why) and why[n]:  # HealthBench: the grader's explanation, or the error
            out.append(f"        {visible(why[n])}")
    out += ["ATTEMPTS", *(_attempts(run, case_id) or ["  none yet"])]
    return "\n".join(out)

"""The report's last two sections: every case, worst first, with each run's verdicts
side by side; and each run's failures grouped under their cause."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from ..bench.causes import error_cause, readable_error
from ..bench.dataset import Case, Dataset

if TYPE_CHECKING:
    from .page_sources import Source

ANSWER_LIMIT = 4000  # characters of an answer shown per model; the rest is elided
# Cases shown in full, worst first: past this the page says how it was thinned (a page
# of 25,000 cases would weigh 74 MB; every case stays in `batchbench export`).
CASES_SHOWN = 1000
PROMPT_WORDS = 12  # words of a case's prompt shown beside its id


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _answer(text: Any) -> str:
    text = "" if text is None else str(text)
    if len(text) > ANSWER_LIMIT:
        text = text[:ANSWER_LIMIT] + f"\n… ({len(text) - ANSWER_LIMIT} more characters)"
    return f"<pre>{_e(text)}</pre>"


def cases_section(sources: list[Source], ds: Dataset) -> str:
    """Every case, worst first (lowest mean score across runs), with each run's verdicts."""
    selected = [c for c in ds.cases if any(c["case_id"] in s.rows for s in sources)]

    def key(case: Case) -> float:
        found = [s.rows[case["case_id"]].get("score") for s in sources if case["case_id"] in s.rows]
        scores = [float(x) for x in found if isinstance(x, (int, float))]
        return sum(scores) / len(scores) if scores else -1.0

    items = []
    ordered = sorted(selected, key=key)
    shown = ordered[:CASES_SHOWN]
    thinned = (
        f"<p class='note'>Showing the {len(shown):,} worst of {len(ordered):,} cases (the lowest"
        " mean score across runs); every case is in <code>batchbench export</code>.</p>"
        if len(shown) < len(ordered)
        else ""
    )
    for case in shown:
        cid = case["case_id"]
        rows = [s.rows.get(cid, {}) for s in sources]
        verdicts = [{d["item_id"]: d["matched"] for d in r.get("decisions", [])} for r in rows]
        disagree = any(
            len({v.get(it["item_id"]) for v in verdicts}) > 1 for it in case["rubric_items"]
        )
        scores = " · ".join(
            f"{_e(s.side.name)} {r['score']:.3f}" if "score" in r else f"{_e(s.side.name)} failed"
            for s, r in zip(sources, rows)
        )
        head = "".join(f"<th>{_e(s.side.name)}</th>" for s in sources)
        rubric = "".join(
            f"<tr{' class=disagree' if len({v.get(it['item_id']) for v in verdicts}) > 1 else ''}>"
            f"<td class='n'>{it['points']:+g}</td><td>{_e(it['text'])}</td>"
            + "".join(_mark(v.get(it["item_id"]), it["points"]) for v in verdicts)
            + "</tr>"
            for it in case["rubric_items"]
        )
        answers = "".join(
            f"<h4>{_e(s.side.name)}</h4>{_answer(r.get('answer', r.get('error')))}"
            for s, r in zip(sources, rows)
        )
        items.append(
            f"<details class='case' id='case-{_e(cid)}' data-benchmark='{_e(case['benchmark'])}'"
            f" data-disagree='{int(disagree)}' data-case='{_e(cid)}'><summary>"
            f"{_e(case['benchmark'])} · {_e(cid)} · <q>{_e(_first_words(case['prompt']))}</q>"
            f" · {scores}</summary>"
            f"<h4>prompt</h4><pre>{_e(case['prompt'])}</pre>{answers}"
            f"<table><tr><th>points</th><th>rubric item</th>{head}</tr>{rubric}</table></details>"
        )
    options = "".join(f"<option>{_e(b)}</option>" for b in ds.benchmarks)
    return (
        "<h2 id='cases'>Cases, worst first</h2><form id='filter'>benchmark <select id='bench'>"
        f"<option value=''>all</option>{options}</select> <label><input type=checkbox id='dis'>"
        f" only where the runs disagree</label></form>{thinned}"
        f"<section id='case-list'>{''.join(items)}</section>"
    )


def _first_words(text: str) -> str:
    words = text.split()
    return " ".join(words[:PROMPT_WORDS]) + (" …" if len(words) > PROMPT_WORDS else "")


def _mark(matched: Any, points: float) -> str:
    """✓ met, ✗ not met; green where the verdict is good for the answer, red where not:
    a failure mode (negative points) met is a harm that happened, drawn red."""
    if matched is None:
        return "<td>–</td>"
    harm = points < 0
    good = bool(matched) != harm
    said = ("met" if matched else "not met") + (" (a failure mode: the harm)" if harm else "")
    mark = ("✓" if matched else "✗") + (" harm" if harm and matched else "")
    return f"<td class='{'yes' if good else 'no'}' title='{said}'>{mark}</td>"


def failures_section(sources: list[Source], ds: Dataset) -> str:
    """Each run's failures grouped under their cause, each with its benchmark and a
    readable message; the raw error, and the answer and judge reply, in a <details>."""
    out = ["<h2 id='failures'>Failures</h2>"]
    benchmark_of = {c["case_id"]: c["benchmark"] for c in ds.cases}
    for s in sources:
        failed = [r for r in s.rows.values() if "error" in r]
        if not failed:
            continue
        out.append(f"<h3>{_e(s.side.name)}: {len(failed)} failed</h3>")
        by_cause: dict[str, list[dict[str, Any]]] = {}
        for r in failed:
            by_cause.setdefault(error_cause(str(r["error"])), []).append(r)
        for cause, rows in sorted(by_cause.items(), key=lambda kv: -len(kv[1])):
            out.append(f"<h4 class='cause'>{len(rows)} × {_e(cause)}</h4>")
            for r in rows:
                cid, error = r["case_id"], str(r["error"])
                answer = s.replies.get((cid, "answers"))
                judge = s.replies.get((cid, "judges"))
                out.append(
                    f"<details class='failure' data-case='{_e(cid)}'><summary>"
                    f"{_e(benchmark_of.get(cid, '?'))} · {_e(cid)}: {_e(readable_error(error))}"
                    f"</summary><h5>raw error</h5><pre>{_e(error)}</pre>"
                    + (f"<h5>answer</h5>{_answer(answer)}" if answer is not None else "")
                    + (f"<h5>judge reply</h5>{_answer(judge)}" if judge is not None else "")
                    + "</details>"
                )
    return "".join(out) if len(out) > 1 else out[0] + "<p>None.</p>"

"""One self-contained HTML page for a run or a comparison: read offline, attach to a mail.

Everything is inline (style, SVG figures, a small optional script); the page
works without JavaScript. Every number shown carries its exact value in a
``data-value`` attribute, equal to the summaries' and the comparison's; every
text from a dataset, a model or a judge is escaped, so hostile content shows as
text.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .._io import atomic_write_text
from ..bench.dataset import Case, Dataset, load_dataset
from ..bench.protocol import PROTOCOL_VERSION
from ..costs.rollup import RunCost, cost_line, usage_text
from ..engine.replies import latest_requests, read_replies
from ..errors import ConfigError
from ..kinds import STAGES, Stage
from ..providers import judge_note
from ..reporting import quiet
from ..scores.compare import Comparison, Side, Stats, compare, load_side
from ..scores.noise import noise_text
from ..scores.sources import resolve_all, run_dataset
from ..scores.summary import Summary, last_rows
from . import figures
from .causes import error_cause, readable_error
from .comparison import VERDICT
from .page_assets import SCRIPT, STYLE
from .status import run_status

ANSWER_LIMIT = 4000  # characters of an answer shown per model; the rest is elided
# Cases shown in full, worst first: past this the page says how it was thinned (a page
# of 25,000 cases would weigh 74 MB; every case stays in `batchbench export`).
CASES_SHOWN = 1000
CI_HEADS = "<th>95% CI low</th><th>95% CI high</th>"
PROMPT_WORDS = 12  # words of a case's prompt shown beside its id


@dataclass
class Source:
    side: Side
    rows: dict[str, dict[str, Any]]  # the last row of each case
    # (case id, stage) → the raw reply of its latest request (runs only)
    replies: dict[tuple[str, Stage], str] = field(default_factory=dict)
    cost: RunCost | None = None
    state: str | None = None  # the run's status (runs only)
    pending: int = 0  # its cases still without a final row


def load_sources(
    items: list[str],
    jobs_dir: Path,
    dataset: Path | None,
    labels: Sequence[str] = (),
    warn: Callable[[str], None] = quiet,
) -> tuple[list[Source], Dataset]:
    ds = load_dataset(dataset) if dataset is not None else None
    sources = []
    for named in resolve_all(items, jobs_dir, labels):
        side = load_side(named, ds, warn)
        run = named.run
        rows, _ = last_rows(side.rows)  # as the side read them
        source = Source(side, rows)
        if run is not None:
            config = run.load_config()
            ds = ds or run_dataset(config)
            state = run.state(config.case_ids)
            replies = read_replies(run, config, state)
            for stage in STAGES:
                latest = latest_requests(state, stage)
                for case_id in rows:
                    request = latest.get(case_id)
                    if request in replies:
                        source.replies[case_id, stage] = replies[request]
            status = run_status(run, state=state)
            source.cost, source.state = status["cost"], status["status"]
            source.pending = status["cases"]["pending"]
        sources.append(source)
    if ds is None:
        raise ConfigError("report needs --dataset for results files")
    return sources, ds


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: Any, digits: int = 3, signed: bool = False) -> str:
    """A number shown rounded, with its exact value kept in ``data-value``."""
    if not isinstance(value, (int, float)) or value != value:
        return '<td class="n" data-value="NaN">n/a</td>'
    shown = f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"
    return f'<td class="n" data-value="{value!r}">{shown}</td>'


def _ci(ci: list[Any], signed: bool = False) -> str:
    return _num(ci[0], signed=signed) + _num(ci[1], signed=signed)


def render(
    sources: list[Source],
    ds: Dataset,
    baseline: str | None = None,
    *,
    margin: float | None = None,
    allow_partial: bool = False,
    calibrations: Sequence[str] = (),
) -> str:
    """The whole page (``calibrations``: each run's calibration section, when labels
    were given)."""
    sides = [s.side for s in sources]
    comparison = (
        compare(sides, baseline, margin=margin, allow_partial=allow_partial)
        if len(sides) > 1
        else None
    )
    first = sides[0].summary
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>BedsideBench report: {_e(', '.join(s.name for s in sides))}</title>",
        f"<style>{STYLE}</style></head><body>",
        _header(sources, first),
        _leaderboard(sources),
        _benchmarks(sources),
        "<h2 id='figures'>Figures</h2>",
        "<figure id='forest'>",
        figures.forest([(s.name, s.summary) for s in sides]),
        "<figcaption>Per-benchmark means and 95% intervals, each run.</figcaption></figure>",
    ]
    if comparison is not None:
        parts += [
            "<figure id='differences'>",
            figures.differences(comparison["comparisons"]),
            "<figcaption>Paired differences against the baseline.</figcaption></figure>",
            _comparisons(comparison),
        ]
    parts += [*calibrations, _cases(sources, ds), _failures(sources, ds)]
    parts.append(f"<script>{SCRIPT}</script>")
    return "".join(parts) + "</body></html>\n"


def _header(sources: list[Source], first: Summary) -> str:
    side = sources[0].side
    rows = [
        ("generated", datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
        ("protocol", side.protocol_version or PROTOCOL_VERSION),
        ("dataset digest", side.dataset_sha256),
        (
            "judge",
            f"{side.judge_model} (temperature {first.get('judge_temperature')})"
            + (f"; {note}" if (note := judge_note(str(side.judge_model))) else ""),
        ),
        ("models", ", ".join(str(s.side.answer_model) for s in sources)),
        ("bootstrap", f"{first['bootstrap_samples']} resamples, seed {first['bootstrap_seed']}"),
    ]
    for s in sources:
        summary = s.side.summary
        cases = f"{summary['completed_cases']} completed, {summary['errors']} failed"
        if s.state is not None:
            cases = f"{s.state}: {cases}, {s.pending} pending"
        if s.cost:
            usage = "; ".join(f"{stage}: {usage_text(c)}" for stage, c in s.cost["stages"].items())
            cases += f" — {usage}; {cost_line(s.cost)}"
        if s.side.judge_noise:
            cases += f" — {noise_text(s.side.judge_noise)}"
        rows.append((s.side.name, cases))
    items = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in rows)
    return f"<h1>BedsideBench report</h1><dl id='header'>{items}</dl>"


def judged_by(source: Source, sources: list[Source]) -> str:
    """`` (judged by X)`` beside a run's answer model when the runs have other judges (a
    judge panel's runs: the same answers, each judge's scores)."""
    differ = len({s.side.judge_model for s in sources}) > 1
    return f" (judged by {source.side.judge_model})" if differ else ""


def _leaderboard(sources: list[Source]) -> str:
    ranked = sorted(sources, key=lambda s: -(s.side.summary["overall_macro_mean"] or -1))
    body = ""
    for s in ranked:
        summary = s.side.summary
        failed = summary["errors"]
        flag = f" <span class='failed'>{failed} failed</span>" if failed else ""
        body += (
            f"<tr data-run='{_e(s.side.name)}'><td>{_e(s.side.name)}{flag}</td>"
            f"<td>{_e(s.side.answer_model)}{_e(judged_by(s, sources))}</td>"
            f"<td class='n'>{summary['completed_cases']}</td><td class='n'>{failed}</td>"
            f"{_num(summary['overall_macro_mean'])}{_ci(summary['overall_ci95'])}</tr>"
        )
    note = ""
    if any(s.side.summary["errors"] for s in sources):
        note = (
            "<p class='failed'>A run with failed cases has its mean over fewer cases than the"
            " others: its rank is not like for like. The comparison below pairs only the"
            " cases both runs scored.</p>"
        )
    return (
        "<h2 id='leaderboard'>Leaderboard</h2><table><tr><th>run</th><th>answer model</th>"
        f"<th>cases</th><th>failed</th><th>macro mean</th>{CI_HEADS}</tr>{body}</table>{note}"
    )


def _benchmarks(sources: list[Source]) -> str:
    names = sorted({b for s in sources for b in s.side.summary["benchmarks"]})
    head = "".join(f"<th colspan=3>{_e(s.side.name)}</th>" for s in sources)
    sub_heads = f"<th>mean</th>{CI_HEADS}" * len(sources)
    body = ""
    for name in names:
        cells = ""
        for s in sources:
            b = s.side.summary["benchmarks"].get(name)
            cells += _num(b["mean"]) + _ci(b["ci95"]) if b else "<td></td><td></td><td></td>"
        body += f"<tr data-benchmark='{_e(name)}'><td>{_e(name)}</td>{cells}</tr>"
    overall = "".join(
        _num(s.side.summary["overall_macro_mean"]) + _ci(s.side.summary["overall_ci95"])
        for s in sources
    )
    body += f"<tr data-benchmark='overall (macro)'><th>overall (macro)</th>{overall}</tr>"
    return (
        "<h2 id='benchmarks'>Per benchmark</h2><p>mean, then its 95% interval</p>"
        f"<table><tr><th rowspan=2>benchmark</th>{head}</tr><tr>{sub_heads}</tr>{body}</table>"
    )


def _comparisons(result: Comparison) -> str:
    out = [f"<h2 id='comparison'>Against the baseline ({_e(result['baseline'])})</h2>"]
    margin = result["margin"]
    for c in result["comparisons"]:
        rows = []
        named: list[tuple[str, Stats]] = [
            *c["benchmarks"].items(),
            ("overall (macro)", c["overall"]),
        ]
        for name, v in named:
            p = v["p_holm"] if v["p_holm"] is not None else v["p_value"]
            small = " <span class='small'>(n &lt; 20: not to be trusted)</span>" * v["small_n"]
            verdict = ""
            if margin is not None:
                verdict = f"<td>{VERDICT[v['non_inferior']]}</td>"
            share = v["share_a_better"]
            rows.append(
                f"<tr><td>{_e(name)}{small}</td><td class='n'>{v['n']}</td>"
                f"{_num(v['diff'], signed=True)}{_ci(v['ci95'], signed=True)}"
                + ("<td class='n'>all tie</td>" if share is None else _num(share))
                + f"{_num(v['se_diff'])}{_num(v['mde80'])}{_num(p, digits=4)}{verdict}</tr>"
            )
        within = f"<th>within {margin:g}</th>" if margin is not None else ""
        out.append(
            f"<h3>{_e(c['a'])} − {_e(c['b'])}: {c['paired_cases']} paired cases,"
            f" {c['excluded_cases']} dropped (scored in only one)</h3>"
            "<table class='comparison'>"
            f"<tr><th>benchmark</th><th>n</th><th>diff</th>{CI_HEADS}"
            f"<th>share a better</th><th>se</th><th>MDE (80% power)</th><th>p</th>{within}"
            f"</tr>{''.join(rows)}</table>"
        )
    out.append(
        "<p>p: two-sided bootstrap p-value (overall: Holm-adjusted over the comparisons);"
        " MDE: the smallest true difference this comparison detects with 80% power at a"
        " two-sided 5% level. These intervals cover case sampling only, not answer sampling"
        + (
            f"; within {margin:g}: the 95% interval's low end is above −{margin:g}"
            if margin is not None
            else ""
        )
        + ".</p>"
    )
    return "".join(out)


def _answer(text: Any) -> str:
    text = "" if text is None else str(text)
    if len(text) > ANSWER_LIMIT:
        text = text[:ANSWER_LIMIT] + f"\n… ({len(text) - ANSWER_LIMIT} more characters)"
    return f"<pre>{_e(text)}</pre>"


def _cases(sources: list[Source], ds: Dataset) -> str:
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
            f"<details class='case' data-benchmark='{_e(case['benchmark'])}'"
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


def _failures(sources: list[Source], ds: Dataset) -> str:
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


def write_page(path: Path, text: str) -> None:
    atomic_write_text(path, text, mode=0o644)


__all__ = ["load_sources", "render", "write_page"]

"""One self-contained HTML page for a run or a comparison: read offline, attach to a mail.

Everything is inline (style, SVG figures, a small optional script); the page
works without JavaScript. Every number shown carries its exact value in a
``data-value`` attribute, equal to the summaries' and the comparison's; every
text from a dataset, a model or a judge is escaped, so hostile content shows as
text.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .._io import atomic_write_text
from ..bench.dataset import Dataset
from ..bench.protocol import PROTOCOL_VERSION
from ..costs.rollup import cost_line, usage_text
from ..providers import judge_note
from ..scores.compare import Comparison, Stats, compare
from ..scores.harm import harm_record
from ..scores.length import length_record
from ..scores.noise import noise_text
from ..scores.sealed import Shown
from ..scores.summary import Summary
from . import figures
from .comparison import VERDICT
from .page_assets import SCRIPT, STYLE
from .page_cases import cases_section, failures_section
from .page_flow import flow_section
from .page_harm import harm_section
from .page_length import length_section
from .page_plan import plan_record, plan_section
from .page_prompts import prompts_record, prompts_section
from .page_sources import Source
from .provenance import provenance_html

CI_HEADS = "<th>95% CI low</th><th>95% CI high</th>"


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
    record: dict[str, Any] | None = None,
    appendices: Sequence[str] = (),
) -> str:
    """The whole page (``calibrations``: each run's calibration section, when labels
    were given; ``record``: :func:`page_record`'s, when the caller made it already;
    ``appendices``: sections after the prompts, the filled checklists)."""
    sides = [s.side for s in sources]
    comparison = (
        compare(sides, baseline, margin=margin, allow_partial=allow_partial)
        if len(sides) > 1
        else None
    )
    first = sides[0].summary
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
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
        caveat = f"<p class='caveat'>{_e(JUDGES_CAVEAT)}.</p>" if _judges_differ(sources) else ""
        parts += [
            caveat,
            "<figure id='differences'>",
            figures.differences(comparison["comparisons"]),
            "<figcaption>Paired differences against the baseline.</figcaption></figure>",
            _comparisons(comparison),
        ]
    record = record or page_record(sources, ds, margin=margin)
    parts.append(plan_section(record["plan"]))
    parts.append(provenance_html([s.name for s in sides], record["provenance"]))
    parts.append(flow_section(record["flow"]))
    parts.append(harm_section(record["harm"]))
    parts.append(length_section(record["length"]))
    parts += [*calibrations, cases_section(sources, ds), failures_section(sources, ds)]
    parts.append(prompts_section(record["prompts"]))
    parts += appendices
    parts.append(f"<script>{SCRIPT}</script>")
    return "".join(parts) + "</body></html>\n"


def page_record(
    sources: list[Source],
    ds: Dataset,
    *,
    length_adjusted: bool = False,
    margin: float | None = None,
) -> dict[str, Any]:
    """The page's own figures as plain data (``report --json``): each from the record
    (``length_adjusted``: the length-adjusted mean beside each raw one; ``margin``: the
    non-inferiority margin used, checked against a sealed plan's)."""
    names = [s.side.name for s in sources]
    shown = [
        (
            Shown(
                s.side.name,
                str(s.side.answer_model),
                str(s.side.judge_model),
                str(s.side.dataset_sha256),
                s.side.summary.get("bootstrap_seed"),
                s.side.summary.get("bootstrap_samples"),
            ),
            s.plan,
        )
        for s in sources
    ]
    return {
        "plan": plan_record(shown, margin) if any(s.plan for s in sources) else [],
        "length": {s.side.name: length_record(s.rows, length_adjusted) for s in sources},
        "harm": harm_record(names, [s.rows for s in sources], ds.by_id()),
        "prompts": prompts_record({s.side.name: s.request_files for s in sources}),
        "flow": {s.side.name: s.flow for s in sources},
        "provenance": {s.side.name: s.provenance for s in sources if s.provenance},
    }


def _header(sources: list[Source], first: Summary) -> str:
    side = sources[0].side
    rows = [
        ("generated", datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
        ("protocol", side.protocol_version or PROTOCOL_VERSION),
        ("dataset digest", side.dataset_sha256),
        *_models_and_judges(sources),
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


# A page of one model's answers under several judges (a panel's runs): what it shows is
# the judges, not the models (#63.5); the CLI's compare says the same.
JUDGES_CAVEAT = (
    "the same answers judged by other judges: each difference on this page is where the"
    " judges disagree, not a better model"
)


def _judges_differ(sources: list[Source]) -> bool:
    return len({s.side.judge_model for s in sources}) > 1


def _models_and_judges(sources: list[Source]) -> list[tuple[str, str]]:
    """The header's judge and models rows; for a panel's runs, each run's judge and the
    caveat."""
    first = sources[0]
    temperature = first.side.summary.get("judge_temperature")
    if not _judges_differ(sources):
        judge = str(first.side.judge_model)
        said = f"{judge} (temperature {temperature})"
        said += f"; {note}" if (note := judge_note(judge)) else ""
        return [("judge", said), ("models", ", ".join(str(s.side.answer_model) for s in sources))]
    judges = ", ".join(f"{s.side.judge_model} (run {s.side.name})" for s in sources)
    models = dict.fromkeys(str(s.side.answer_model) for s in sources)
    return [
        ("judges", f"{judges}: {JUDGES_CAVEAT}"),
        ("model" if len(models) == 1 else "models", ", ".join(models)),
    ]


def judged_by(source: Source, sources: list[Source]) -> str:
    """`` (judged by X)`` beside a run's answer model when the runs have other judges (a
    judge panel's runs: the same answers, each judge's scores)."""
    return f" (judged by {source.side.judge_model})" if _judges_differ(sources) else ""


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


def write_page(path: Path, text: str) -> None:
    atomic_write_text(path, text, mode=0o644)


__all__ = ["page_record", "render", "write_page"]

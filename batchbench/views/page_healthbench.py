"""The report page of HealthBench runs: one self-contained HTML page, as the BedsideBench
page is (inline style, no script needed, every text escaped, every number's exact value
in ``data-value``), laid out as HealthBench's paper shows a model: the overall score,
the themes, the axes — simple-evals' figures, each with its ``n`` and bootstrap std —
then each run against the baseline, paired (batchbench's intervals, said so), the
provenance, and every example with each run's completion and each rubric item's verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..bench.healthbench import example_of
from ..engine.provenance import provenance
from ..scores.healthbench_compare import HealthBenchComparison, HealthBenchSide
from ..scores.sources import Named
from .page import _e, _num  # the page's cells: one home
from .page_assets import STYLE
from .provenance import provenance_html


def _metrics_table(sides: Sequence[HealthBenchSide], prefix: str, title: str) -> str:
    names = sorted({k for s in sides for k in s.summary["metrics"] if _is_metric(k, prefix)})
    if not names:
        return ""
    head = "".join(f"<th>{_e(s.name)}</th><th>n</th><th>std</th>" for s in sides)
    rows = []
    for name in names:
        cells = []
        for s in sides:
            m = s.summary["metrics"]
            cells.append(
                _num(m.get(name))
                + _num(m.get(f"{name}:n_samples"), 0)
                + _num(m.get(f"{name}:bootstrap_std"))
            )
        rows.append(f"<tr><td>{_e(name.removeprefix(prefix))}</td>{''.join(cells)}</tr>")
    slug = prefix.rstrip(":")
    return (
        f"<h2 id='{slug}'>{_e(title)}</h2><table><tr><th>{slug}</th>{head}</tr>"
        + "".join(rows)
        + "</table>"
    )


def _is_metric(key: str, prefix: str) -> bool:
    return key.startswith(prefix) and not key.endswith((":n_samples", ":bootstrap_std"))


def _leaderboard(sides: Sequence[HealthBenchSide]) -> str:
    rows = []
    for s in sorted(sides, key=lambda s: -(s.summary.get("score") or 0.0)):
        ci = s.summary.get("overall_ci95") or [None, None]
        m = s.summary["metrics"]
        rows.append(
            f"<tr><td>{_e(s.name)}</td><td>{_e(s.answer_model)}</td><td>{_e(s.judge_model)}</td>"
            + _num(s.summary.get("graded"), 0)
            + _num(s.summary.get("errors"), 0)
            + _num(s.summary.get("score"))
            + _num(m.get("overall_score:bootstrap_std"))
            + _num(ci[0])
            + _num(ci[1])
            + "</tr>"
        )
    return (
        "<h2 id='leaderboard'>Leaderboard</h2><table><tr><th>run</th><th>answer model</th>"
        "<th>grader</th><th>graded</th><th>errors</th><th>overall score</th>"
        "<th>bootstrap std</th><th>95% CI low (ours)</th><th>95% CI high (ours)</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _comparisons(result: HealthBenchComparison) -> str:
    out = [
        "<h2 id='comparison'>Against the baseline</h2>",
        f"<p>Each run against {_e(result['baseline'])}, paired over the examples both graded"
        f" ({result['bootstrap']['samples']} paired resamples, seed"
        f" {result['bootstrap']['seed']}: batchbench's intervals; simple-evals gives none).</p>",
    ]
    for c in result["comparisons"]:
        rows = "".join(
            f"<tr><td>{_e(p['metric'])}</td>"
            + _num(p["n"], 0)
            + _num(p["run"])
            + _num(p["baseline"])
            + _num(p["difference"], signed=True)
            + _num(p["ci95"][0], signed=True)
            + _num(p["ci95"][1], signed=True)
            + _num(p["share_run_ahead"], 2)
            + "</tr>"
            for p in c["metrics"]
        )
        out.append(
            f"<h3>{_e(c['run'])}</h3><table><tr><th>metric</th><th>n</th><th>run</th>"
            "<th>baseline</th><th>difference</th><th>95% CI low</th><th>95% CI high</th>"
            f"<th>share ahead</th></tr>{rows}</table>"
        )
    return "".join(out)


def _examples(named: Sequence[Named], rows: dict[str, dict[str, dict[str, Any]]]) -> str:
    """Every example: its conversation, each run's completion, each item's verdicts."""
    from ..scores.sources import run_dataset

    first = named[0].run
    assert first is not None
    config = first.load_config()
    cases = run_dataset(config).by_id()
    out = ["<h2 id='examples'>Examples</h2>"]
    for case_id in config.case_ids:
        example = example_of(cases[case_id])
        convo = "".join(
            f"<p><b>{_e(m['role'])}</b>: {_e(m['content'])}</p>" for m in example.prompt
        )
        answers = []
        for n in named:
            row = rows[n.name].get(case_id, {})
            said = "".join(str(m.get("content", "")) for m in row.get("completion") or [])
            score = row.get("error") or row.get("score")
            answers.append(f"<p><b>{_e(n.name)}</b> (score {_e(score)})</p><pre>{_e(said)}</pre>")
        head = (
            "<tr><th>points</th><th>criterion</th>"
            + "".join(f"<th>{_e(n.name)}</th>" for n in named)
            + "</tr>"
        )
        items = []
        for k, item in enumerate(example.rubrics):
            marks = []
            for n in named:
                graded = rows[n.name].get(case_id, {}).get("rubric_items") or [{}] * (k + 1)
                g = graded[k] if k < len(graded) else {}
                met = g.get("criteria_met")
                word = "met" if met is True else "not met" if met is False else "not graded"
                why = g.get("explanation") or g.get("error") or ""
                cls = "yes" if met is True else "no" if met is False else "failed"
                marks.append(f"<td class='{cls}' title='{_e(why)}'>{word}</td>")
            items.append(
                f"<tr><td class='n'>{_e(item.points)}</td><td>{_e(item.criterion)}</td>"
                + "".join(marks)
                + "</tr>"
            )
        tags = ", ".join(example.example_tags)
        out.append(
            f"<details class='case' id='case-{_e(case_id)}'><summary>{_e(case_id)}"
            f" <span class='small'>{_e(tags)}</span></summary>{convo}{''.join(answers)}"
            f"<table>{head}{''.join(items)}</table></details>"
        )
    return "".join(out)


def render(
    named: Sequence[Named],
    sides: Sequence[HealthBenchSide],
    comparison: HealthBenchComparison | None,
    rows: dict[str, dict[str, dict[str, Any]]],
) -> str:
    """The whole page (``rows``: each run's last row of each example)."""
    records = {}
    for n in named:
        assert n.run is not None
        config = n.run.load_config()
        records[n.name] = provenance(n.run.state(config.case_ids), config)
    first = sides[0]
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>HealthBench report: {_e(', '.join(s.name for s in sides))}</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>HealthBench report</h1>",
        "<dl><dt>dataset</dt>"
        f"<dd><code>{_e(first.dataset_sha256)}</code></dd><dt>protocol</dt>"
        f"<dd>{_e(first.summary.get('protocol_version'))}: simple-evals' healthbench_eval"
        " (the grader asked once per rubric item; scores and metrics by its rules)</dd>"
        "<dt>figures</dt><dd>each metric is simple-evals' clipped mean, with its n and"
        " bootstrap std; the 95% intervals are batchbench's own</dd></dl>",
        _leaderboard(sides),
        _metrics_table(sides, "theme:", "Themes"),
        _metrics_table(sides, "axis:", "Axes"),
    ]
    if comparison is not None:
        parts.append(_comparisons(comparison))
    parts.append(provenance_html([s.name for s in sides], records))
    parts.append(_examples(named, rows))
    return "".join(parts) + "</body></html>\n"

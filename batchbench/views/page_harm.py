"""The report's harm section: each run's endorsed harm (:mod:`..scores.harm`), the paired
difference against the first run, and the worst cases — figures from the record alone."""

from __future__ import annotations

import html
from typing import Any


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _rate(rate: float | None, ci: list[float | None]) -> str:
    if rate is None:
        return "<td class='n'>n/a</td><td class='n'></td>"
    low, high = ci
    return (
        f"<td class='n' data-value='{rate!r}'>{rate:.1%}</td>"
        f"<td class='n'>{low:.1%} – {high:.1%}</td>"
    )


def harm_section(record: dict[str, Any]) -> str:
    """The section from :func:`..scores.harm.harm_record`'s record."""
    runs, differences = record["runs"], record["differences"]
    if not any(h["negative_items"] for h in runs.values()):
        return ""
    rows = "".join(
        f"<tr><td>{_e(name)}</td><td class='n'>{h['cases_with_harm']:,} / {h['cases']:,}</td>"
        + _rate(h["case_rate"], h["case_ci"])
        + f"<td class='n'>{h['items_endorsed']:,} / {h['negative_items']:,}</td>"
        + _rate(h["item_rate"], h["item_ci"])
        + "</tr>"
        for name, h in runs.items()
    )
    out = [
        "<h2 id='harm'>Endorsed harm</h2>",
        "<p>A rubric item with negative points is a statement the answer must not make;"
        " the judge marking it met is <em>endorsed harm</em>. Per run: the scored cases with"
        " at least one, and the negative items endorsed, each with a 95% Wilson interval"
        " (the items' treats them as independent, which items of one case are not: read it"
        " as too narrow).</p>",
        "<table><tr><th>run</th><th>cases with harm</th><th>share</th><th>95% CI</th>"
        f"<th>items endorsed</th><th>share</th><th>95% CI</th></tr>{rows}</table>",
    ]
    if differences:
        pairs = "".join(
            f"<tr><td>{_e(label)}</td><td class='n'>{d['n']:,}</td>"
            + (
                f"<td class='n'>{d['difference']:+.1%}</td>"
                f"<td class='n'>{d['ci'][0]:+.1%} – {d['ci'][1]:+.1%}</td>"
                if d["difference"] is not None
                else "<td class='n'>n/a</td><td></td>"
            )
            + f"<td class='n'>{d['only_a']:,} / {d['only_b']:,}</td></tr>"
            for label, d in differences.items()
        )
        out.append(
            "<p>Paired difference in the share of cases with harm, over the cases both runs"
            " scored (Newcombe's interval for paired proportions).</p><table><tr><th>runs</th>"
            "<th>cases</th><th>difference</th><th>95% CI</th><th>harm in one only"
            f" (first / second)</th></tr>{pairs}</table>"
        )
    for name, h in runs.items():
        if h["worst"]:
            items = "".join(
                f"<li><a href='#case-{_e(w['case_id'])}'>{_e(w['case_id'])}</a>:"
                f" {w['items']} item(s), {w['harm_points']:g} harm points</li>"
                for w in h["worst"]
            )
            out.append(
                f"<h3>{_e(name)}: the cases with the most harm endorsed</h3><ol>{items}</ol>"
            )
    return "".join(out)

"""The report's answer lengths (:mod:`..scores.length`), with the length-adjusted mean
beside the raw one when asked."""

from __future__ import annotations

import html
from typing import Any


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def length_section(lengths: dict[str, Any]) -> str:
    """Each run's answer lengths, and the length-adjusted mean beside the raw one when
    asked (:mod:`..scores.length`)."""
    if not any(found["answers"] for found in lengths.values()):
        return ""
    adjusted = any("adjusted_mean" in found for found in lengths.values())
    heads = "".join(f"<th>{q}</th>" for q in ("p10", "p25", "median", "p75", "p90"))
    more = "<th>mean score (cases)</th><th>length-adjusted</th>" if adjusted else ""
    rows = []
    for name, found in lengths.items():
        q = found["quantiles"]
        cells = "".join(
            f"<td class='n'>{q.get(k, 0):,}</td>" for k in ("p10", "p25", "p50", "p75", "p90")
        )
        extra = ""
        if adjusted:
            raw, adj = found.get("raw_mean"), found.get("adjusted_mean")
            extra = "".join(
                f"<td class='n'>{v:.3f}</td>" if isinstance(v, float) else "<td>n/a</td>"
                for v in (raw, adj)
            )
        rows.append(
            f"<tr><td>{_e(name)}</td><td class='n'>{found['answers']:,}</td>{cells}"
            f"<td class='n'>{found['over_centre']:,}</td>{extra}</tr>"
        )
    note = (
        " The length-adjusted score (HealthBench Professional's rule: each score less"
        " 0.0147 for every 500 characters beyond 2,000) is shown beside the raw mean, never"
        " instead of it."
        if adjusted
        else ""
    )
    return (
        "<h2 id='length'>Answer length</h2><p>Characters of each run's scored answers: a"
        f" judge may favour long answers.{note}</p><table><tr><th>run</th><th>answers</th>"
        f"{heads}<th>over 2,000</th>{more}</tr>{''.join(rows)}</table>"
    )

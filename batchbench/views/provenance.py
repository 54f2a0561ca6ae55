"""A run's provenance (:mod:`..engine.provenance`) in words: ``status``'s lines and the
report's table — requested beside served, when, and with which parameters."""

from __future__ import annotations

from html import escape
from typing import Any

from ..kinds import STAGES


def served_text(rec: dict[str, Any]) -> str:
    """``gpt-4.1-2025-04-14 (40)``: each served model and its replies (none: not said)."""
    served = rec.get("served") or {}
    if not served:
        return "not said by the service (or nothing collected yet)"
    tiers = rec.get("tiers") or {}
    said = f" at tier {', '.join(f'{t} ({n})' for t, n in tiers.items())}" if tiers else ""
    return ", ".join(f"{m} ({n})" for m, n in served.items()) + said


def _span(rec: dict[str, Any]) -> str:
    first, last = rec.get("first_query"), rec.get("last_query")
    return f"{first} to {last}" if first else "not queried yet"


def _parameters(rec: dict[str, Any]) -> str:
    p = rec["parameters"]
    t = p["temperature_requests"]
    sent = (
        f"temperature {p['temperature']} sent on {t['sent']} requests, not on {t['not_sent']}"
        if t["not_sent"]
        else f"temperature {p['temperature']} sent"
    )
    return (
        f"{sent}; reasoning effort {p['reasoning_effort']}; structured output"
        f" {p['structured_output']}; max tokens {p['max_tokens']}"
    )


def provenance_lines(record: dict[str, Any]) -> list[str]:
    """``status``'s lines: each stage's requested and served model and its query span,
    then what a reviewer must be told."""
    lines = []
    for stage in STAGES:
        rec = record[stage]
        lines.append(
            f"{stage}: asked {rec['requested']} on {rec['service']}, served"
            f" {served_text(rec)}; queried {_span(rec)}"
        )
    lines.append(f"judge parameters: {_parameters(record['judges'])}")
    lines.extend(f"provenance: {note}" for note in record["notes"])
    return lines


def provenance_html(names: list[str], records: dict[str, dict[str, Any]]) -> str:
    """The report's provenance section: a row per run and stage."""
    if not records:
        return ""
    head = "<tr><th>run</th><th>stage</th><th>requested</th><th>served (replies)</th>"
    head += "<th>fingerprints</th><th>queried (UTC)</th><th>parameters</th></tr>"
    rows = []
    notes = []
    for name in names:
        record = records.get(name)
        if record is None:
            continue
        for stage in STAGES:
            rec = record[stage]
            prints = ", ".join(f"{f} ({n})" for f, n in rec["fingerprints"].items()) or "—"
            cells = (
                name,
                stage,
                f"{rec['requested']} on {rec['service']}",
                served_text(rec),
                prints,
                _span(rec),
                _parameters(rec),
            )
            rows.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in cells) + "</tr>")
        notes += [f"{name}: {note}" for note in record["notes"]]
    said = "".join(f"<li>{escape(n)}</li>" for n in notes)
    return (
        "<section id='provenance'><h2>Provenance</h2>"
        "<p>The model each run asked for beside the one each service says served its replies"
        " (the reply's <code>model</code>, Gemini's <code>modelVersion</code>; OpenAI's"
        " <code>system_fingerprint</code>), counted over the good replies, and when the"
        " queries went out.</p>"
        f"<div class='scroll'><table>{head}{''.join(rows)}</table></div>"
        f"{f'<ul>{said}</ul>' if said else ''}</section>"
    )

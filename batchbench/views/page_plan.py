"""The report's check of the sealed analysis plan (:mod:`..scores.sealed`): each plan the
runs recorded, and whether the analysis shown is the one planned, or each deviation."""

from __future__ import annotations

import html
from typing import Any

from ..scores.sealed import Shown, deviations, recorded


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def plan_record(
    runs: list[tuple[Shown, dict[str, str] | None]], margin: float | None
) -> list[dict[str, Any]]:
    """Each distinct plan the runs recorded: its hash, what it says, the runs under it,
    those shown without it, and the deviations (none: as planned)."""
    plans: dict[str, dict[str, str]] = {p["sha256"]: p for _, p in runs if p is not None}
    out = []
    for sha, record in plans.items():
        sealed = recorded(record)
        under = [shown for shown, p in runs if p is not None and p["sha256"] == sha]
        outside = [shown.name for shown, p in runs if p is None or p["sha256"] != sha]
        found = deviations(sealed, [s for s, _ in runs], margin)
        found += [f"{name}: not run under this plan" for name in outside]
        out.append(
            {
                "sha256": sha,
                "fields": sealed.fields,
                "runs": [s.name for s in under],
                "deviations": found,
                "as_planned": not found,
            }
        )
    return out


def plan_section(plans: list[dict[str, Any]]) -> str:
    if not plans:
        return ""
    parts = ["<h2 id='plan'>Analysis plan</h2>"]
    for plan in plans:
        fields = "".join(
            f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in plan["fields"].items()
        )
        verdict = (
            "<p class='verdict'><strong>Analysis as planned.</strong></p>"
            if plan["as_planned"]
            else "<p class='verdict'><strong>Deviations from the plan:</strong></p><ul>"
            + "".join(f"<li>{_e(d)}</li>" for d in plan["deviations"])
            + "</ul>"
        )
        parts.append(
            f"<p>Sealed plan <code>{_e(plan['sha256'])}</code>, recorded by"
            f" {_e(', '.join(plan['runs']))} when they started.</p>{verdict}"
            f"<table><tr><th>planned</th><th></th></tr>{fields}</table>"
        )
    return "".join(parts)

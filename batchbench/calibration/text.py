"""A calibration and a labels plan as people read them."""

from __future__ import annotations

import math
from html import escape
from typing import Any

from .analysis import Calibration
from .ppi import SMALL_N


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _ci(ci: list[float] | None) -> str:
    return "" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def calibration_text(c: Calibration) -> str:
    lines = [
        f"run {c['run']}: judge against {len(c['raters'])} physician(s)"
        f" ({', '.join(c['raters'])}), {c['labelled_cases']} labelled case(s)"
    ]
    if c["left_out"]:
        lines.append(
            f"left out: {len(c['left_out'])} labelled case(s) whose row is an error"
            f" ({', '.join(c['left_out'][:5])}{'…' if len(c['left_out']) > 5 else ''})"
        )
    lines.append(
        f"{'benchmark':<26} {'n':>4} {'N':>5} {'sens':>5} {'spec':>5} {'κ':>6}"
        f"  {'judge':>23}  {'physicians':>10}  {'corrected (PPI++)':>25} {'ρ²':>5} {'n_eff':>6}"
    )
    flagged = False
    for name, b in c["benchmarks"].items():
        a, j, p, k = b["agreement"], b["judge"], b["physicians"], b["corrected"]
        small = k["small_n"] and k["n"] > 0
        flagged |= small
        corrected = (
            "—" if not k["n"] else f"{k['estimate']:.3f} {_ci(k['ci95'])}" + ("*" if small else "")
        )
        lines.append(
            f"{name:<26} {k['n']:>4} {k['N']:>5} {_num(a['sensitivity'], 2):>5}"
            f" {_num(a['specificity'], 2):>5} {_num(a['kappa'], 2):>6}"
            f"  {_num(j['mean'])} {_ci(j['ci95']):>17}  {_num(p['mean']):>10}"
            f"  {corrected:>25} {_num(k['rho2'], 2):>5} {_num(k['effective_n'], 1):>6}"
        )
    o = c["overall"]
    k = o["corrected"]
    corrected = (
        "—"
        if k["estimate"] is None
        else f"{k['estimate']:.3f} {_ci(k['ci95'])}" + ("*" if k["small_n"] else "")
    )
    a = o["agreement"]
    lines.append(
        f"{'overall (macro)':<26} {'':>4} {'':>5} {_num(a['sensitivity'], 2):>5}"
        f" {_num(a['specificity'], 2):>5} {_num(a['kappa'], 2):>6}"
        f"  {_num(o['judge']['mean'])} {_ci(o['judge']['ci95']):>17}"
        f"  {_num(o['physicians']):>10}  {corrected:>25}"
    )
    if not k["complete"] and k["estimate"] is not None:
        lines.append(
            "overall corrected: over the labelled benchmarks only"
            f" ({', '.join(k['benchmarks'])}); label every benchmark for the macro score"
        )
    if flagged or k["small_n"]:
        lines.append(
            f"* fewer than {SMALL_N} labelled cases: a normal interval undercovers there"
            " (label more cases before relying on it)"
        )
    between = c["between_raters"]
    if between is not None:
        lines.append(
            f"between raters: Fleiss' κ {_num(between['fleiss_kappa'], 2)} over"
            f" {between['items']} item(s) labelled by two or more"
        )
    lines.append(
        "sens/spec: the judge's 'met' against the physicians'; ρ²: judge–physician"
        " correlation squared; n_eff = n/(1−ρ²), what the labels are worth with the judge"
    )
    return "\n".join(lines)


def plan_text(p: dict[str, Any]) -> str:
    lines = [
        f"labelled cases per benchmark for a corrected interval of ±{p['width']:g}"
        " (from the pilot's judge–physician agreement):"
    ]
    for name, b in p["benchmarks"].items():
        if b["needed"] is None:
            why = (
                "the pilot has fewer than 2 labelled cases here"
                if b["pilot"] < 2
                else "not reachable: the unlabelled cases' own spread is wider"
            )
            lines.append(f"  {name:<26} {why}")
        else:
            more = max(0, b["needed"] - b["pilot"])
            cap = " (more than the benchmark holds)" if b["needed"] > b["cases"] else ""
            lines.append(
                f"  {name:<26} {b['needed']:>4} ({b['pilot']} in the pilot, {more} more){cap}"
            )
    return "\n".join(lines)


def calibration_html(c: Calibration) -> str:
    """The report's calibration section for one run."""
    head = (
        "<tr><th>benchmark</th><th>n</th><th>N</th><th>sens</th><th>spec</th><th>κ</th>"
        "<th>judge</th><th>physicians</th><th>corrected (PPI++)</th><th>ρ²</th><th>n_eff</th></tr>"
    )
    rows = []
    flagged = False
    for name, b in c["benchmarks"].items():
        a, j, p, k = b["agreement"], b["judge"], b["physicians"], b["corrected"]
        small = k["small_n"] and k["n"] > 0
        flagged |= small
        corrected = (
            "—" if not k["n"] else f"{k['estimate']:.3f} {_ci(k['ci95'])}" + ("*" if small else "")
        )
        rows.append(
            f"<tr><td>{escape(name)}</td><td>{k['n']}</td><td>{k['N']}</td>"
            f"<td>{_num(a['sensitivity'], 2)}</td><td>{_num(a['specificity'], 2)}</td>"
            f"<td>{_num(a['kappa'], 2)}</td><td>{_num(j['mean'])} {_ci(j['ci95'])}</td>"
            f"<td>{_num(p['mean'])}</td><td>{corrected}</td><td>{_num(k['rho2'], 2)}</td>"
            f"<td>{_num(k['effective_n'], 1)}</td></tr>"
        )
    o = c["overall"]
    k = o["corrected"]
    overall = "—" if k["estimate"] is None else f"{k['estimate']:.3f} {_ci(k['ci95'])}"
    rows.append(
        f"<tr><th>overall (macro)</th><td></td><td></td>"
        f"<td>{_num(o['agreement']['sensitivity'], 2)}</td>"
        f"<td>{_num(o['agreement']['specificity'], 2)}</td>"
        f"<td>{_num(o['agreement']['kappa'], 2)}</td>"
        f"<td>{_num(o['judge']['mean'])} {_ci(o['judge']['ci95'])}</td>"
        f"<td>{_num(o['physicians'])}</td><td>{overall}{'*' if k['small_n'] else ''}</td>"
        "<td></td><td></td></tr>"
    )
    notes = [
        f"{len(c['raters'])} physician(s) ({escape(', '.join(c['raters']))}),"
        f" {c['labelled_cases']} labelled case(s)."
    ]
    if flagged or k["small_n"]:
        notes.append(f"* fewer than {SMALL_N} labelled cases: a normal interval undercovers there.")
    between = c["between_raters"]
    if between is not None:
        notes.append(
            f"Between raters: Fleiss' κ {_num(between['fleiss_kappa'], 2)} over"
            f" {between['items']} item(s)."
        )
    return (
        f"<h2 id='calibration-{escape(c['run'])}'>The judge against physicians:"
        f" {escape(c['run'])}</h2><table>{head}{''.join(rows)}</table>"
        f"<p>{' '.join(notes)}</p>"
    )

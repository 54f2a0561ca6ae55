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


HEADER = (
    "benchmark",
    "n",
    "N",
    "sens",
    "spec",
    "κ",
    "judge",
    "physicians",
    "corrected (PPI++)",
    "ρ²",
    "n_eff",
)
WIDTHS = (
    26,
    4,
    5,
    5,
    5,
    6,
    23,
    10,
    25,
    5,
    6,
)  # the text table's columns (right-aligned but the first)


def _cells(c: Calibration) -> list[list[str]]:
    """The table, one list of cells per benchmark and one for the overall macro score
    (a ``*`` marks a corrected score on fewer than SMALL_N labelled cases)."""
    rows = []
    for name, b in c["benchmarks"].items():
        a, j, p, k = b["agreement"], b["judge"], b["physicians"], b["corrected"]
        small = "*" if k["small_n"] and k["n"] > 0 else ""
        corrected = "—" if not k["n"] else f"{k['estimate']:.3f} {_ci(k['ci95'])}{small}"
        rows.append(
            [
                name,
                str(k["n"]),
                str(k["N"]),
                _num(a["sensitivity"], 2),
                _num(a["specificity"], 2),
                _num(a["kappa"], 2),
                f"{_num(j['mean'])} {_ci(j['ci95'])}",
                _num(p["mean"]),
                corrected,
                _num(k["rho2"], 2),
                _num(k["effective_n"], 1),
            ]
        )
    o = c["overall"]
    k, a = o["corrected"], o["agreement"]
    corrected = "—" if k["estimate"] is None else f"{k['estimate']:.3f} {_ci(k['ci95'])}"
    rows.append(
        [
            "overall (macro)",
            "",
            "",
            _num(a["sensitivity"], 2),
            _num(a["specificity"], 2),
            _num(a["kappa"], 2),
            f"{_num(o['judge']['mean'])} {_ci(o['judge']['ci95'])}",
            _num(o["physicians"]),
            corrected + ("*" if k["small_n"] else ""),
            "",
            "",
        ]
    )
    return rows


def _notes(c: Calibration) -> list[str]:
    k = c["overall"]["corrected"]
    notes = []
    if c["left_out"]:
        shown = ", ".join(c["left_out"][:5]) + ("…" if len(c["left_out"]) > 5 else "")
        notes.append(
            f"left out: {len(c['left_out'])} labelled case(s) whose row is an error ({shown})"
        )
    if not k["complete"] and k["estimate"] is not None:
        notes.append(
            "overall corrected: over the labelled benchmarks only"
            f" ({', '.join(k['benchmarks'])}); label every benchmark for the macro score"
        )
    flagged = any(
        b["corrected"]["small_n"] and b["corrected"]["n"] for b in c["benchmarks"].values()
    )
    if flagged or k["small_n"]:
        notes.append(
            f"* fewer than {SMALL_N} labelled cases: a normal interval undercovers there"
            " (label more cases before relying on it)"
        )
    between = c["between_raters"]
    if between is not None:
        notes.append(
            f"between raters: Fleiss' κ {_num(between['fleiss_kappa'], 2)}, Krippendorff's α"
            f" {_num(between['krippendorff_alpha'], 2)}, Gwet's AC1"
            f" {_num(between['gwet_ac1'], 2)} over {between['items']} item(s) labelled by two"
            " or more"
        )
    if c["moved"]:
        shown = "; ".join(
            f"{m['benchmark']} {m['judge']:.3f} → {m['corrected']:.3f} (±{m['half']:.3f})"
            for m in c["moved"]
        )
        notes.append(
            "the physicians' labels move the judge's score by more than the corrected"
            f" interval's half-width in {len(c['moved'])} benchmark(s), furthest first: {shown}"
        )
    for rater, f1 in c["per_rater"].items():
        ceiling = (
            f", a physician against the others {_num(f1['ceiling_f1'], 2)}"
            f" ({f1['shared_items']} pairs)"
            if f1["ceiling_f1"] is not None
            else ""
        )
        notes.append(
            f"balanced F1 against {rater}: the judge {_num(f1['judge_f1'], 2)}"
            f" ({f1['items']} items){ceiling}"
        )
    kinds = [
        f"{kind} sens {_num(k['agreement']['sensitivity'], 2)} spec"
        f" {_num(k['agreement']['specificity'], 2)} κ {_num(k['agreement']['kappa'], 2)}"
        f" ({k['cases']} cases{'*' if k['cases'] < SMALL_N else ''})"
        for kind, k in c["item_kinds"].items()
    ]
    if kinds:
        notes.append(f"by kind of rubric item: {'; '.join(kinds)}")
    shares = [
        f"{name} {r['apparent']:.3f} → {r['estimate']:.3f} {_ci(r['ci95'])}"
        for name, b in c["benchmarks"].items()
        if (r := b["rogan_gladen"])["estimate"] is not None
    ]
    if shares:
        notes.append(
            "Rogan–Gladen, the share of rubric items met, judge's → corrected for its"
            f" sensitivity and specificity: {'; '.join(shares)}"
        )
    notes.append(
        "sens/spec: the judge's 'met' against the physicians'; ρ²: judge–physician"
        " correlation squared; n_eff = n/(1−ρ²), what the labels are worth with the judge"
    )
    notes.append(
        "assumptions: PPI++ needs the labelled cases to be a random draw of the run's and"
        " models nothing of the judge's errors; Rogan–Gladen needs the judge's sensitivity"
        " and specificity to be the same on the unlabelled items as on the labelled ones,"
        " and corrects the share of items met, not the points-weighted score"
    )
    return notes


def _who(c: Calibration) -> str:
    return (
        f"judge against {len(c['raters'])} physician(s) ({', '.join(c['raters'])}),"
        f" {c['labelled_cases']} labelled case(s)"
    )


def calibration_text(c: Calibration) -> str:
    def line(cells: list[str]) -> str:
        first, *rest = cells
        return " ".join(
            [f"{first:<{WIDTHS[0]}}", *(f"{x:>{w}}" for x, w in zip(rest, WIDTHS[1:]))]
        ).rstrip()

    lines = [f"run {c['run']}: {_who(c)}", line(list(HEADER))]
    lines += [line(cells) for cells in _cells(c)]
    return "\n".join(lines + _notes(c))


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
    """The report's calibration section for one run: the same table and notes."""
    head = "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in HEADER) + "</tr>"
    rows = "".join(
        "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in cells) + "</tr>"
        for cells in _cells(c)
    )
    notes = " ".join(f"{escape(n)}." for n in [_who(c), *_notes(c)])
    return (
        f"<h2 id='calibration-{escape(c['run'])}'>The judge against physicians:"
        f" {escape(c['run'])}</h2><table>{head}{rows}</table><p>{notes}</p>"
    )

"""A calibration and a labels plan as people read them."""

from __future__ import annotations

import math
from html import escape

from ..formats import MISSING
from ..scores.stats import SMALL_N, Z95
from .analysis import Calibration
from .raters import rating_html, rating_lines


def _num(value: float | None, digits: int = 3) -> str:
    return MISSING if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


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
# the text table's columns (right-aligned but the first)
WIDTHS = (26, 4, 5, 5, 5, 6, 23, 10, 25, 5, 6)


def _cut(value: float) -> float:
    return min(1.0, max(0.0, value))


def _corrected(estimate: float | None, ci: list[float] | None, small: bool) -> str:
    """A corrected score as the table shows it: a case score lies in [0, 1], so a figure
    the normal interval puts outside is shown cut there and marked ``†``; ``*`` marks one
    on fewer than SMALL_N labelled cases."""
    if estimate is None or not math.isfinite(estimate):
        return MISSING
    figures = [estimate, *(ci or [])]
    cut = "†" if any(x < 0 or x > 1 for x in figures) else ""
    shown = [_cut(x) for x in figures]
    interval = _ci(shown[1:]) if ci is not None else ""
    if ci is not None and len(ci) == 2 and ci[0] == ci[1]:  # every label alike: no spread
        interval = "(no spread)"  # the note below the table says why
    return f"{shown[0]:.3f} {interval}".rstrip() + cut + ("*" if small else "")


def _cells(c: Calibration) -> list[list[str]]:
    """The table, one list of cells per benchmark and one for the overall macro score.
    ρ² and n_eff are not shown on fewer than SMALL_N labelled cases: from a handful of
    points a correlation is near 1 by chance, and n_eff would claim hundreds of cases."""
    rows = []
    for name, b in c["benchmarks"].items():
        a, j, p, k = b["agreement"], b["judge"], b["physicians"], b["corrected"]
        small = k["small_n"] and k["n"] > 0
        corrected = MISSING if not k["n"] else _corrected(k["estimate"], k["ci95"], small)
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
                MISSING if small else _num(k["rho2"], 2),
                MISSING if small else _num(k["effective_n"], 1),
            ]
        )
    o = c["overall"]
    k, a = o["corrected"], o["agreement"]
    corrected = _corrected(k["estimate"], k["ci95"], k["small_n"])
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
            corrected,
            "",
            "",
        ]
    )
    return rows


_RG_CUT = {
    "at 0": "cut at 0: the judge says met less often than its false positives alone would"
    " make it, so its sensitivity and specificity rest on too few labels",
    "at 1": "cut at 1: the judge says met more often than its sensitivity allows, so its"
    " sensitivity and specificity rest on too few labels",
}


def verdict(c: Calibration) -> list[str]:
    """Three lines before the table: how well the judge agrees with the physicians
    against how well they agree among themselves; which score to report; what more
    labels would buy."""
    return [_agreement_line(c), _score_line(c), _labels_line(c)]


def _agreement_line(c: Calibration) -> str:
    a = c["overall"]["agreement"]
    judge = (
        f"κ {_num(a['kappa'], 2)} (sensitivity {_num(a['sensitivity'], 2)}, specificity"
        f" {_num(a['specificity'], 2)}, over {a['n']} item verdicts)"
    )
    pairs = [
        (f["judge_f1"], f["ceiling_f1"])
        for f in c["per_rater"].values()
        if f["judge_f1"] is not None and f["ceiling_f1"] is not None
    ]
    if not pairs:
        return (
            f"agreement: the judge agrees with the physicians at {judge}; no item has two"
            " physicians' verdicts, so there is no physicians' own agreement to set it"
            " against (a second physician on some cases gives one)"
        )
    judge_f1 = sum(float(j) for j, _ in pairs) / len(pairs)
    peers_f1 = sum(float(p) for _, p in pairs) / len(pairs)
    relation = "at least as closely as" if judge_f1 >= peers_f1 else "less closely than"
    return (
        f"agreement: the judge agrees with the physicians at {judge}; by balanced F1, the"
        f" judge against a physician {judge_f1:.2f}, a physician against the others"
        f" {peers_f1:.2f}: the judge agrees with them {relation} they agree among"
        " themselves"
    )


def _score_line(c: Calibration) -> str:
    o = c["overall"]
    k = o["corrected"]
    judge = f"{_num(o['judge']['mean'])} {_ci(o['judge']['ci95'])}".rstrip()
    total = len(c["benchmarks"])
    if k["estimate"] is None:
        return f"score: report the judge's {judge}; no benchmark has a labelled case"
    shown = _corrected(k["estimate"], k["ci95"], False)
    if not k["complete"]:
        return (
            f"score: report the judge's {judge}; the labels cover {len(k['benchmarks'])}"
            f" of {total} benchmarks, so there is no corrected macro score (over those"
            f" {len(k['benchmarks'])}: {shown})"
        )
    few = [b for b in c["benchmarks"].values() if b["corrected"]["small_n"]]
    if k["ci95"] is None or few:
        return (
            f"score: report the judge's {judge}; the corrected {shown} rests on fewer than"
            f" {SMALL_N} labelled cases in {len(few)} of {total} benchmarks, too few for its"
            " interval to hold: a pointer, not a finding"
        )
    low, high = k["ci95"]
    mean = o["judge"]["mean"]
    if low <= mean <= high:
        where = (
            "lies within it: the physicians find no bias beyond what their labels leave uncertain"
        )
    else:
        where = "lies {} it: the judge scores {} than the physicians would".format(
            *(("above", "higher") if mean > high else ("below", "lower"))
        )
    labelled = sum(b["corrected"]["n"] for b in c["benchmarks"].values())
    return (
        f"score: report the corrected {shown} (PPI++: the judge's scores on every case,"
        f" corrected by {labelled} physician-labelled ones); the judge's {judge} {where}"
    )


def _labels_line(c: Calibration) -> str:
    per = [b["corrected"] for b in c["benchmarks"].values()]
    short = sum(max(0, min(SMALL_N, k["n"] + k["N"]) - k["n"]) for k in per)
    tiny = sum(1 for k in per if k["n"] + k["N"] < SMALL_N)
    stays = f" ({tiny} benchmark(s) hold fewer than {SMALL_N} cases and stay a pointer)"
    stays = stays if tiny else ""
    if any(k["se"] is None for k in per):
        bare = sum(1 for k in per if k["se"] is None)
        return (
            f"labels: {bare} benchmark(s) have fewer than 2 labelled cases and so no"
            f" interval; {SMALL_N} labelled cases in each ({short} more) give a benchmark"
            f" a corrected score to rely on{stays}"
        )
    if not any(k["N"] for k in per):
        return (
            "labels: every case of the run is labelled, so the corrected score is the"
            " physicians' own; only more cases would narrow it"
        )
    now = Z95 * math.sqrt(sum(float(k["se"] or 0.0) ** 2 for k in per)) / len(per)
    # Twice the labels (at most every case) shrink each benchmark's labelled term by
    # n / min(2n, n + N); the unlabelled term stays.
    then = (
        Z95
        * math.sqrt(
            sum(
                k["unlabelled_var"]
                + (float(k["se"] or 0.0) ** 2 - k["unlabelled_var"])
                * k["n"]
                / min(2 * k["n"], k["n"] + k["N"])
                for k in per
            )
        )
        / len(per)
    )
    more = f"; {short} more (to {SMALL_N} in each benchmark) make it a finding" if short else ""
    more += stays
    return (
        "labels: twice the labelled cases (at most every case) would narrow the corrected"
        f" interval from about ±{now:.3f} to ±{then:.3f}{more}; `calibrate --plan --width W`"
        " says how many each benchmark needs"
    )


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
            f"* fewer than {SMALL_N} labelled cases: a normal interval undercovers there,"
            " and ρ² and n_eff are not shown (label more cases before relying on it)"
        )
    if "(no spread)" in "".join(cells[8] for cells in _cells(c)):
        notes.append(
            "(no spread): the labelled cases' scores do not vary, so no interval can be"
            " drawn — not a certainty; label cases the judge and physicians may differ on"
        )
    if "†" in "".join(cells[8] for cells in _cells(c)):
        notes.append(
            "† cut at 0 or 1: the normal interval reached past the scores a case can have,"
            " a sign it rests on too few cases"
        )
    between = c["between_raters"]
    if between is not None:
        notes.append(
            f"between raters: Fleiss' κ {_num(between['fleiss_kappa'], 2)}, Krippendorff's α"
            f" {_num(between['krippendorff_alpha'], 2)}, Gwet's AC1"
            f" {_num(between['gwet_ac1'], 2)} over {between['items']} item(s) labelled by two"
            " or more"
        )
    small = {name for name, b in c["benchmarks"].items() if b["corrected"]["small_n"]}
    found = [m for m in c["moved"] if m["benchmark"] not in small]
    hints = [m for m in c["moved"] if m["benchmark"] in small]
    for moved, lead in (
        (found, "the physicians' labels move the judge's score by more than the corrected"),
        (
            hints,
            f"on fewer than {SMALL_N} labelled cases, so not yet a finding, the labels"
            " would move the judge's score by more than the corrected",
        ),
    ):
        if moved:
            shown = "; ".join(
                f"{m['benchmark']} {m['judge']:.3f} → {_cut(m['corrected']):.3f} (±{m['half']:.3f})"
                for m in moved
            )
            notes.append(
                f"{lead} interval's half-width in {len(moved)} benchmark(s), furthest first:"
                f" {shown}"
            )
    notes.extend(_agreement(c))
    notes.append(
        "n: the benchmark's labelled cases, N: its cases nobody labelled; sens/spec: the"
        " judge's 'met' against the physicians'; κ: Cohen's, judge against physicians;"
        " ρ²: judge–physician correlation squared; n_eff = n/(1−ρ²), what the labels are"
        " worth with the judge"
    )
    notes.append(
        "assumptions: PPI++ needs the labelled cases to be a random draw of the run's and"
        " models nothing of the judge's errors; Rogan–Gladen needs the judge's sensitivity"
        " and specificity to be the same on the unlabelled items as on the labelled ones,"
        " and corrects the share of items met, not the points-weighted score"
    )
    return notes


def _agreement(c: Calibration) -> list[str]:
    """How the judge agrees with the physicians: per rater, per kind of rubric item, and
    the share of items met corrected for its errors (Rogan–Gladen)."""
    notes = []
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
        + (f" ({_RG_CUT[r['cut']]})" if r["cut"] else "")
        for name, b in c["benchmarks"].items()
        if (r := b["rogan_gladen"])["estimate"] is not None
    ]
    if shares:
        notes.append(
            "Rogan–Gladen, the share of rubric items met, judge's → corrected for its"
            f" sensitivity and specificity: {'; '.join(shares)}"
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

    lines = [f"run {c['run']}: {_who(c)}", *verdict(c), "", line(list(HEADER))]
    lines += [line(cells) for cells in _cells(c)]
    return "\n".join(lines + _notes(c) + ["", *rating_lines(c["rating"])])


def calibration_html(c: Calibration) -> str:
    """The report's calibration section for one run: the same table and notes."""
    head = "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in HEADER) + "</tr>"
    rows = "".join(
        "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in cells) + "</tr>"
        for cells in _cells(c)
    )
    said = "".join(f"<p>{escape(line)}.</p>" for line in [_who(c), *verdict(c)])
    notes = "".join(f"<li>{escape(n)}.</li>" for n in _notes(c))
    return (
        f"<h2 id='calibration-{escape(c['run'])}'>The judge against physicians:"
        f" {escape(c['run'])}</h2>{said}<table>{head}{rows}</table><ul>{notes}</ul>"
        + rating_html(c["rating"])
    )

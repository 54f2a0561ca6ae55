"""The physicians pick the judge (#50): a judge panel's judges, each against the same
physicians' labels of the same answers.

For each judge: Cohen's κ and HealthBench's balanced F1 (the mean of the F1 of "met"
and of "not met", over every labelled item verdict) with 95% intervals from a bootstrap
over the labelled cases (an item's verdicts move with its case), and its bias — how far
its raw overall score sits from the PPI++-corrected one (:mod:`.analysis`). Beside them
the ceiling: the physicians against each other on the items two or more labelled. The
judge that agrees best (κ) is named, and McNemar's exact test over the labelled
verdicts says whether it agrees better than the next judge by more than the noise.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from html import escape
from typing import TypedDict

import numpy as np

from ..bench.dataset import Case
from ..bench.results import row_verdicts
from ..formats import MISSING, interval, num
from ..scores.stats import balanced_f1
from . import Graded
from .analysis import calibrate
from .labels import Label
from .ppi import agreement

RESAMPLES = 2000
SEED = 0

Pair = tuple[str, bool, bool]  # case id, the judge's verdict, the physician's


class JudgeAgreement(TypedDict):
    judge: str
    run: str
    verdicts: int  # labelled item verdicts compared
    kappa: float | None
    kappa_ci95: list[float] | None
    balanced_f1: float | None
    balanced_f1_ci95: list[float] | None
    raw: float | None  # the judge's overall score
    corrected: float | None  # PPI++-corrected with the labels
    bias: float | None  # raw − corrected


class Paired(TypedDict):
    best: str
    other: str
    best_only: int  # verdicts the best judge got right and the other wrong
    other_only: int
    p_value: float
    larger_than_noise: bool


class PanelCalibration(TypedDict):
    labelled_cases: int
    judges: list[JudgeAgreement]
    ceiling: dict[str, float | int | None] | None  # physicians among themselves
    best: str | None
    paired: Paired | None


def _pairs(graded: Graded, labels: Sequence[Label]) -> dict[int, Pair]:
    """Each label (by its place in ``labels``) the judge has a verdict for, paired."""
    verdicts = {r["case_id"]: row_verdicts(r.get("decisions")) for r in graded.rows}
    out = {}
    for n, label in enumerate(labels):
        said = verdicts.get(label.case_id)
        if said is not None and label.item_id in said:
            out[n] = (label.case_id, said[label.item_id], label.met)
    return out


def _kappa(pairs: Sequence[tuple[bool, bool]]) -> float | None:
    return agreement(pairs)["kappa"]


def _interval(pairs: Sequence[Pair], metric) -> list[float] | None:  # type: ignore[no-untyped-def]
    """The metric's 95% percentile interval over case resamples (None when undefined)."""
    by_case: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for case_id, judge, truth in pairs:
        by_case[case_id].append((judge, truth))
    groups = list(by_case.values())
    if len(groups) < 2:
        return None
    rng = np.random.default_rng(SEED)
    values = []
    for picks in rng.integers(0, len(groups), size=(RESAMPLES, len(groups))):
        value = metric([p for i in picks for p in groups[i]])
        if value is not None and math.isfinite(value):
            values.append(value)
    if len(values) < RESAMPLES // 2:
        return None
    low, high = np.percentile(values, [2.5, 97.5])
    return [float(low), float(high)]


def mcnemar_p(b: int, c: int) -> float:
    """McNemar's exact two-sided p: ``b`` and ``c`` discordant pairs, binomial(b+c, ½)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / (1 << n)
    return min(1.0, 2 * tail)


def _ceiling(labels: Sequence[Label]) -> dict[str, float | int | None] | None:
    by_item: dict[tuple[str, str], dict[str, bool]] = defaultdict(dict)
    for label in labels:
        by_item[(label.case_id, label.item_id)][label.rater] = label.met
    pairs = [
        (said[a], said[b])
        for said in by_item.values()
        for i, a in enumerate(sorted(said))
        for b in sorted(said)[i + 1 :]
    ]
    if not pairs:
        return None
    return {"pairs": len(pairs), "kappa": _kappa(pairs), "balanced_f1": balanced_f1(pairs)}


def calibrate_panel(
    panel: Mapping[str, Graded], labels: Sequence[Label], cases: Mapping[str, Case]
) -> PanelCalibration:
    """Each judge of the panel (judge model → its run, graded) against the labels."""
    found: list[JudgeAgreement] = []
    pairs_of: dict[str, dict[int, Pair]] = {}
    for judge, graded in panel.items():
        keyed = pairs_of[judge] = _pairs(graded, labels)
        pairs = list(keyed.values())
        plain = [(j, t) for _, j, t in pairs]
        result = calibrate(graded.name, graded.rows, graded.summary, labels, graded.cases)
        raw = result["overall"]["judge"]["mean"]
        fixed = result["overall"]["corrected"]["estimate"]
        found.append(
            JudgeAgreement(
                judge=judge,
                run=graded.name,
                verdicts=len(pairs),
                kappa=_kappa(plain),
                kappa_ci95=_interval(pairs, _kappa),
                balanced_f1=balanced_f1(plain),
                balanced_f1_ci95=_interval(pairs, balanced_f1),
                raw=raw,
                corrected=fixed,
                bias=None if raw is None or fixed is None else raw - fixed,
            )
        )
    ranked = sorted(
        (j for j in found if j["kappa"] is not None), key=lambda j: -(j["kappa"] or 0.0)
    )
    paired = None
    if len(ranked) >= 2:
        best, other = ranked[0]["judge"], ranked[1]["judge"]
        both = [
            (pairs_of[best][k], pairs_of[other][k]) for k in pairs_of[best] if k in pairs_of[other]
        ]
        b = sum(1 for x, y in both if x[1] == x[2] != y[1])  # the best right, the other wrong
        c = sum(1 for x, y in both if y[1] == y[2] != x[1])
        p = mcnemar_p(b, c)
        paired = Paired(
            best=best, other=other, best_only=b, other_only=c, p_value=p, larger_than_noise=p < 0.05
        )
    labelled = {label.case_id for label in labels if label.case_id in cases}
    return PanelCalibration(
        labelled_cases=len(labelled),
        judges=found,
        ceiling=_ceiling(labels),
        best=ranked[0]["judge"] if ranked else None,
        paired=paired,
    )


def _rows(result: PanelCalibration) -> list[list[str]]:
    """The panel's table: a header, then a row a judge."""
    rows = [["judge", "verdicts", "κ", "95% CI", "balanced F1", "95% CI", "raw", "corrected"]]
    rows[0].append("bias")
    for j in result["judges"]:
        rows.append(
            [
                j["judge"],
                str(j["verdicts"]),
                num(j["kappa"]),
                interval(j["kappa_ci95"] or [None, None]),
                num(j["balanced_f1"]),
                interval(j["balanced_f1_ci95"] or [None, None]),
                num(j["raw"]),
                num(j["corrected"]),
                MISSING if j["bias"] is None else f"{j['bias']:+.3f}",
            ]
        )
    return rows


def _title(result: PanelCalibration) -> str:
    return (
        f"the judge panel against the physicians ({result['labelled_cases']} labelled cases;"
        " intervals: a bootstrap over the labelled cases)"
    )


def _notes(result: PanelCalibration) -> list[str]:
    """What the table says: the physicians' own agreement, which judge agrees best (and
    whether by more than the noise), which number to report, what bias means."""
    lines = []
    ceiling = result["ceiling"]
    if ceiling is not None:
        lines.append(
            f"physicians among themselves ({ceiling['pairs']} verdict pairs): κ"
            f" {num(ceiling['kappa'])}, balanced F1 {num(ceiling['balanced_f1'])} — the most a"
            " judge can be asked to reach"
        )
    paired = result["paired"]
    if result["best"] is None:
        lines.append("no judge's agreement could be measured (no labelled verdict)")
    elif paired is None:
        lines.append(f"agrees best: {result['best']}")
    else:
        verdict = (
            "larger than the noise"
            if paired["larger_than_noise"]
            else "not larger than the noise: label more cases before choosing on agreement"
        )
        lines.append(
            f"agrees best: {paired['best']}; against {paired['other']} the difference is"
            f" {verdict} (McNemar over the labelled verdicts: {paired['best_only']} right only"
            f" by {paired['best']}, {paired['other_only']} only by {paired['other']};"
            f" p = {paired['p_value']:.3g})"
        )
    lines += _report_lines(result)
    lines.append(
        "bias: the judge's raw score minus the physicians'-corrected one (PPI++); a judge"
        " with a large bias needs the corrected score reported"
    )
    return lines


def panel_text(result: PanelCalibration) -> str:
    """The judges side by side, the ceiling, which agrees best (and whether by more than
    the noise), and which number to report."""
    rows = _rows(result)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [_title(result) + ":"]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines + ["  " + note for note in _notes(result)])


def panel_html(result: PanelCalibration, run: str) -> str:
    """The report's section for a panel: the same table and notes (#63.3)."""
    head, *body = _rows(result)
    cells = "".join(
        "<tr>" + "".join(f"<{t}>{escape(c)}</{t}>" for c in row) + "</tr>"
        for t, row in [("th", head), *[("td", r) for r in body]]
    )
    notes = "".join(f"<li>{escape(n)}.</li>" for n in _notes(result))
    return (
        f"<h2 id='panel-{escape(run)}'>The judge panel against physicians: {escape(run)}</h2>"
        f"<p>{escape(_title(result).capitalize())}.</p><table>{cells}</table><ul>{notes}</ul>"
    )


def _report_lines(result: PanelCalibration) -> list[str]:
    """Which judge's number the score line above is, and which to report (#63.3); a
    judge that agrees with the physicians more than they agree among themselves, why
    that can be."""
    judges = result["judges"]
    if not judges:
        return []
    first, best = judges[0], result["best"]
    out = []
    if best is not None and best != first["judge"]:
        chosen = next(j for j in judges if j["judge"] == best)
        settled = result["paired"] is not None and result["paired"]["larger_than_noise"]
        why = (
            "by more than the noise: its corrected score is the one to report"
            if settled
            else "but not by more than the noise: either corrected score may be reported;"
            " say which, and that the judge was chosen before the scores were seen"
        )
        out.append(
            f"report: the score line above is {first['judge']}'s (this run's judge);"
            f" {best} agrees best with the physicians, {why} ({best}: corrected"
            f" {num(chosen['corrected'])}, run {chosen['run']})"
        )
    else:
        out.append(
            f"report: the score line above, {first['judge']}'s corrected score: this"
            " run's judge is the one that agrees best"
        )
    ceiling = result["ceiling"]
    top = ceiling["kappa"] if ceiling is not None else None
    above = [
        j["judge"]
        for j in judges
        if isinstance(top, float) and j["kappa"] is not None and j["kappa"] > top
    ]
    if above:
        out.append(
            f"{', '.join(above)} agree{'s' if len(above) == 1 else ''} with the physicians"
            " more than they agree among themselves: with few labels, chance agreement on"
            " rare verdicts, or a judge that follows one physician closely, this can happen;"
            " it is no sign of a judge better than physicians (label more cases, and see"
            " each physician's own agreement)"
        )
    return out


class JudgesPlan(TypedDict):
    """How many labels tell two judges' agreement with the physicians apart (``plan``)."""

    judges: list[str]
    verdicts: int  # the pilot's labelled item verdicts both judges gave
    labelled_cases: int
    agreement: list[float]  # each judge's share of verdicts the physicians agree with
    discordant: float  # ψ: the share where one judge is right and the other wrong
    mde: float
    power: float
    alpha: float
    verdicts_needed: int | None
    cases_needed: int | None
    note: str | None


def judges_plan(
    a: Graded, b: Graded, labels: Sequence[Label], mde: float, power: float, alpha: float
) -> JudgesPlan:
    """Connor's (1987) sample size for McNemar's test: ``n = (z₁₋α/₂·√ψ + z_power·√(ψ −
    D²))² / D²`` labelled verdicts to detect a difference ``D`` in the share each judge
    gets right, ψ the pilot's discordant share; in cases at the pilot's verdicts a case."""
    from statistics import NormalDist

    pa, pb = _pairs(a, labels), _pairs(b, labels)
    both = [(pa[k], pb[k]) for k in pa if k in pb]
    n = len(both)
    cases = len({x[0] for x, _ in both})
    right = [(x[1] == x[2], y[1] == y[2]) for x, y in both]
    psi = sum(1 for r, s in right if r != s) / n if n else 0.0
    needed = cases_needed = None
    note = None
    if not n:
        note = "no labelled verdict both judges gave: label the pilot first"
    elif psi <= mde**2:
        note = (
            f"the judges are right and wrong on the same verdicts too often (ψ = {psi:.3f})"
            f" for a difference of {mde} to show: none at this difference"
        )
    else:
        z = NormalDist().inv_cdf
        root = z(1 - alpha / 2) * math.sqrt(psi) + z(power) * math.sqrt(psi - mde**2)
        needed = math.ceil(root**2 / mde**2)
        cases_needed = math.ceil(needed / (n / cases))
    return JudgesPlan(
        judges=[a.name, b.name],
        verdicts=n,
        labelled_cases=cases,
        agreement=[sum(r for r, _ in right) / n, sum(s for _, s in right) / n] if n else [],
        discordant=psi,
        mde=mde,
        power=power,
        alpha=alpha,
        verdicts_needed=needed,
        cases_needed=cases_needed,
        note=note,
    )


def judges_plan_text(p: JudgesPlan) -> str:
    head = (
        f"{p['judges'][0]} against {p['judges'][1]}: the pilot's {p['verdicts']} labelled"
        f" verdicts ({p['labelled_cases']} cases)"
    )
    if p["agreement"]:
        head += (
            f" — right on {p['agreement'][0]:.1%} and {p['agreement'][1]:.1%}, one right and"
            f" the other wrong on {p['discordant']:.1%}"
        )
    if p["verdicts_needed"] is None:
        return f"{head}\n{p['note']}"
    per_case = p["verdicts"] / max(p["labelled_cases"], 1)
    return (
        f"{head}\nto tell their agreement apart by {p['mde']} (power {p['power']}, two-sided"
        f" {p['alpha']}, McNemar): about {p['verdicts_needed']:,} labelled verdicts, that is"
        f" {p['cases_needed']:,} cases at the pilot's {per_case:.1f} verdicts a case"
    )

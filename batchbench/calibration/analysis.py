"""One run's judge against its physicians' labels: agreement, three scores, what labels buy.

The judge's case score ``f`` is the run's row score; a physician's case score is the
protocol's own scoring (:mod:`batchbench.bench.scoring`) of that physician's item
verdicts, and ``Y`` is the mean over the physicians who labelled the case. A rater
must label every item of a case to score it. Cases whose row is an error (no judge
verdicts) are left out and counted.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from ..bench.dataset import Case
from ..bench.decisions import lay_verdicts
from ..bench.results import row_verdicts
from ..bench.scoring import rubric_frame, score_joined
from ..scores.stats import Z95, balanced_f1, fleiss_kappa, gwet_ac1, krippendorff_alpha
from ..scores.summary import Summary
from .formats import LabelsFormat
from .labels import Label, LabelsError
from .ppi import (
    Agreement,
    Corrected,
    RoganGladen,
    agreement,
    corrected,
    labels_needed,
    narrowest,
    overall,
    rogan_gladen,
)
from .raters import Rater, rating_record


class Interval(TypedDict):
    n: int
    mean: float | None
    ci95: list[float] | None


class BenchmarkCalibration(TypedDict):
    agreement: Agreement
    judge: Interval  # today's score, with its bootstrap interval
    physicians: Interval  # the labelled cases, scored from the physicians' verdicts
    corrected: Corrected
    rogan_gladen: RoganGladen  # the share of items met, Se/Sp-corrected


class Calibration(TypedDict):
    run: str
    raters: list[str]
    labelled_cases: int
    left_out: list[str]  # labelled cases whose row is an error (no judge verdicts)
    benchmarks: dict[str, BenchmarkCalibration]
    overall: dict[str, Any]
    item_kinds: dict[str, dict[str, Any]]  # criteria / failure modes: agreement, cases
    between_raters: dict[str, Any] | None
    per_rater: dict[str, dict[str, float | int | None]]
    moved: list[dict[str, Any]]
    rating: dict[str, Any]  # the physicians as raters (:mod:`.raters`)


def physician_scores(
    labels: Sequence[Label], cases: Mapping[str, Case], unsure: Sequence[Label] = ()
) -> dict[str, float]:
    """Each labelled case's ``Y``: the mean of its raters' case scores by the protocol (a
    rater ``unsure`` of an item of a case gives that case no score)."""
    abstained = {(label.rater, label.case_id) for label in unsure}
    by_rater: dict[str, dict[str, dict[str, bool]]] = defaultdict(lambda: defaultdict(dict))
    for label in labels:
        if (label.rater, label.case_id) not in abstained:
            by_rater[label.rater][label.case_id][label.item_id] = label.met
    scores: dict[str, list[float]] = defaultdict(list)
    for rater, verdicts in sorted(by_rater.items()):
        laid: dict[str, list[bool]] = {}  # each rubric item's verdict, in rubric order
        for case_id, found in verdicts.items():
            items = [it["item_id"] for it in cases[case_id]["rubric_items"]]
            if found.keys() != set(items):
                raise LabelsError(
                    f"rater {rater!r} labelled {len(found)} of the {len(items)} items of case"
                    f" {case_id}: a case score needs every item"
                )
            laid[case_id] = [found[i] for i in items]
        chosen = [cases[c] for c in verdicts]
        scored = score_joined(lay_verdicts(laid, rubric_frame(chosen)))
        for case_id, score in zip(scored["case_id"], scored["score"]):
            scores[case_id].append(float(score))
    return {case_id: sum(v) / len(v) for case_id, v in scores.items()}


def calibrate(
    run: str,
    rows: Sequence[Mapping[str, Any]],
    summary: Summary,
    labels: Sequence[Label],
    cases: Mapping[str, Case],
    raters: Mapping[str, Rater] | None = None,
    formats: Sequence[LabelsFormat] = (),
) -> Calibration:
    """``labels``: the physicians' verdicts, their ``unsure`` ones in (an abstention: left
    out of the figures, reported in ``rating`` with ``raters`` described and the
    labelling tools' ``formats``)."""
    everything = labels
    unsure = [x for x in labels if x.unsure]
    labels = [x for x in labels if not x.unsure]
    judged = {
        r["case_id"]: r
        for r in rows
        if "score" in r and row_verdicts(r.get("decisions")) is not None
    }
    labelled = physician_scores(labels, cases, unsure)
    left_out = sorted(c for c in labelled if c not in judged)
    pairs: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    kinds: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    kind_cases: dict[str, set[str]] = defaultdict(set)
    for label in labels:
        row = judged.get(label.case_id)
        if row is not None:
            verdicts = row_verdicts(row["decisions"]) or {}
            pair = (verdicts[label.item_id], label.met)
            pairs[cases[label.case_id]["benchmark"]].append(pair)
            kind = _kind(cases[label.case_id], label.item_id)
            kinds[kind].append(pair)
            kind_cases[kind].add(label.case_id)
    per: dict[str, BenchmarkCalibration] = {}
    for name in sorted(summary["benchmarks"]):
        mine = [c for c, r in judged.items() if r["benchmark"] == name]
        with_y = [c for c in mine if c in labelled]
        y = [labelled[c] for c in with_y]
        f = [float(judged[c]["score"]) for c in with_y]
        rest = [float(judged[c]["score"]) for c in mine if c not in labelled]
        said = summary["benchmarks"][name]
        per[name] = {
            "agreement": agreement(pairs[name]),
            "judge": {"n": said["n"], "mean": said["mean"], "ci95": list(said["ci95"])},
            "physicians": {"n": len(y), "mean": sum(y) / len(y) if y else None, "ci95": None},
            "corrected": corrected(y, f, rest),
            "rogan_gladen": rogan_gladen(*_items_met(judged, mine), pairs[name]),
        }
    labelled_in = {b: c for b, c in per.items() if c["corrected"]["n"] > 0}
    estimate, se = (
        overall({b: c["corrected"] for b, c in labelled_in.items()})
        if labelled_in
        else (None, None)
    )
    all_pairs = [p for found in pairs.values() for p in found]
    physicians = [c["physicians"]["mean"] for c in labelled_in.values()]
    return {
        "run": run,
        "raters": sorted({label.rater for label in labels}),
        "labelled_cases": len(labelled) - len(left_out),
        "left_out": left_out,
        "benchmarks": per,
        "overall": {
            "agreement": agreement(all_pairs),
            "judge": {
                "mean": summary["overall_macro_mean"],
                "ci95": list(summary["overall_ci95"]),
            },
            "physicians": None
            if len(labelled_in) < len(per)
            else sum(physicians) / len(physicians),  # type: ignore[arg-type]
            "corrected": {
                "estimate": estimate,
                "se": se,
                "ci95": None
                if se is None or estimate is None
                else [estimate - Z95 * se, estimate + Z95 * se],
                "benchmarks": sorted(labelled_in),
                "complete": len(labelled_in) == len(per),
                "small_n": any(c["corrected"]["small_n"] for c in labelled_in.values()),
            },
        },
        "item_kinds": {
            kind: {"agreement": agreement(kinds[kind]), "cases": len(kind_cases[kind])}
            for kind in ITEM_KINDS
            if kinds[kind]
        },
        "between_raters": _between_raters(labels),
        "per_rater": _per_rater(labels, judged),
        "moved": _moved(per),
        "rating": rating_record(everything, rows, raters, formats),
    }


# The dataset's only kind of rubric item: a criterion a strong answer meets (points > 0),
# or a failure mode it must not show (points < 0; endorsing a fabricated drug, say).
ITEM_KINDS = ("criteria", "failure modes")


def _kind(case: Case, item_id: str) -> str:
    points = next(i["points"] for i in case["rubric_items"] if i["item_id"] == item_id)
    return ITEM_KINDS[1] if points < 0 else ITEM_KINDS[0]


def _items_met(judged: Mapping[str, Mapping[str, Any]], case_ids: Sequence[str]) -> tuple[int, int]:
    """How many rubric items of these judged cases the judge said met, of how many."""
    verdicts = [row_verdicts(judged[c]["decisions"]) or {} for c in case_ids]
    return sum(sum(v.values()) for v in verdicts), sum(len(v) for v in verdicts)


def _moved(per: Mapping[str, BenchmarkCalibration]) -> list[dict[str, Any]]:
    """The benchmarks whose correction moves the judge's score by more than the corrected
    interval's half-width, furthest first: where the judge is furthest from the
    physicians, beyond what the labels leave uncertain."""
    out = []
    for name, b in per.items():
        k, judge = b["corrected"], b["judge"]["mean"]
        if not k["n"] or k["ci95"] is None or judge is None:
            continue
        half = (k["ci95"][1] - k["ci95"][0]) / 2
        if abs(k["estimate"] - judge) > half:
            out.append(
                {"benchmark": name, "judge": judge, "corrected": k["estimate"], "half": half}
            )
    return sorted(out, key=lambda m: -abs(m["corrected"] - m["judge"]))


def _between_raters(labels: Sequence[Label]) -> dict[str, Any] | None:
    """The physicians' agreement among themselves on the items two or more labelled:
    Fleiss' κ, Krippendorff's α and Gwet's AC1 (each missing rating allowed)."""
    by_item: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for label in labels:
        by_item[(label.case_id, label.item_id)].append(label.met)
    shared = [v for v in by_item.values() if len(v) > 1]
    if not shared:
        return None
    return {
        "items": len(shared),
        "fleiss_kappa": fleiss_kappa(shared),
        "krippendorff_alpha": krippendorff_alpha(shared),
        "gwet_ac1": gwet_ac1(shared),
    }


def _per_rater(
    labels: Sequence[Label], judged: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, float | int | None]]:
    """Per physician, HealthBench's balanced F1: the judge's verdicts against that
    physician's (``judge_f1``), beside the physician's own against the other
    physicians' on the items they share (``ceiling_f1``: how well a physician agrees
    with physicians, the most a judge can be asked to)."""
    by_item: dict[tuple[str, str], dict[str, bool]] = defaultdict(dict)
    for label in labels:
        by_item[(label.case_id, label.item_id)][label.rater] = label.met
    out: dict[str, dict[str, float | int | None]] = {}
    for rater in sorted({label.rater for label in labels}):
        judge: list[tuple[bool, bool]] = []
        peers: list[tuple[bool, bool]] = []
        for (case_id, item_id), said in by_item.items():
            if rater not in said:
                continue
            row = judged.get(case_id)
            verdicts = row_verdicts(row["decisions"]) if row is not None else None
            if verdicts is not None:
                judge.append((verdicts[item_id], said[rater]))
            peers += [(said[rater], met) for other, met in said.items() if other != rater]
        out[rater] = {
            "items": len(judge),
            "judge_f1": balanced_f1(judge),
            "shared_items": len(peers),
            "ceiling_f1": balanced_f1(peers),
        }
    return out


def plan_labels(
    rows: Sequence[Mapping[str, Any]],
    labels: Sequence[Label],
    cases: Mapping[str, Case],
    width: float,
) -> dict[str, Any]:
    """From a labelled pilot: labelled cases per benchmark for a corrected interval of
    half-width ``width`` (:func:`.ppi.labels_needed`)."""
    judged = {r["case_id"]: r for r in rows if "score" in r}
    labelled = physician_scores(labels, cases)
    out: dict[str, Any] = {}
    for name in sorted({c["benchmark"] for c in cases.values() if c["case_id"] in judged}):
        mine = [c for c, r in judged.items() if r["benchmark"] == name]
        with_y = [c for c in mine if c in labelled]
        y = [labelled[c] for c in with_y]
        f = [float(judged[c]["score"]) for c in with_y]
        f_all = [float(judged[c]["score"]) for c in mine]
        needed = labels_needed(y, f, f_all, width)
        plan: dict[str, Any] = {"pilot": len(with_y), "cases": len(mine), "needed": needed}
        best = narrowest(y, f, f_all)
        if best is not None and (needed is None or needed > len(mine)):
            # out of reach here: what is within it, and what a reachable width takes
            wider = math.ceil(best * 100 - 1e-9) / 100
            plan["narrowest"] = best
            plan["wider"] = {"width": wider, "needed": labels_needed(y, f, f_all, wider)}
        out[name] = plan
    return {"width": width, "benchmarks": out}


def plan_text(p: dict[str, Any]) -> str:
    """The labelling plan (:func:`plan_labels`), for people."""
    lines = [
        f"labelled cases per benchmark for a corrected interval of ±{p['width']:g}"
        " (from the pilot's judge–physician agreement):"
    ]
    for name, b in p["benchmarks"].items():
        reach = ""
        if "narrowest" in b:
            wider = b["wider"]
            # rounded up, never to the width asked: ±0.0504 is not ±0.05 met (#63.9)
            best = math.ceil(b["narrowest"] * 1000 - 1e-9) / 1000
            reach = (
                f"; with all {b['cases']} of its cases labelled ±{best:.3f} at best,"
                f" wider than ±{p['width']:g}"
                + (
                    f", ±{wider['width']:g} takes {wider['needed']}"
                    if wider["needed"] is not None
                    else ""
                )
            )
        if b["needed"] is None:
            why = (
                "the pilot has fewer than 2 labelled cases here: label 2 or more to plan"
                if b["pilot"] < 2
                else "not reachable: the judge's spread over the run's cases alone is wider"
            )
            lines.append(f"  {name:<26} {why}{reach}")
        else:
            more = max(0, b["needed"] - b["pilot"])
            cap = " (more than the benchmark holds" + reach + ")" if reach else ""
            lines.append(
                f"  {name:<26} {b['needed']:>4} ({b['pilot']} in the pilot, {more} more){cap}"
            )
    return "\n".join(lines)

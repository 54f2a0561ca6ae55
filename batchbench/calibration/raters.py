"""The physicians as raters, as GRRAS asks them reported (#66.6): who they were (a
raters file: id, specialty, years, country), how blind (what the labelling tool showed
them), how long a label took (where the tool keeps it: Label Studio's ``lead_time``),
how often they could not tell (``unsure``: an abstention rate) and how much they agree
— Fleiss' κ among themselves and Cohen's κ with the judge, each with the abstentions
counted as a third answer and without them.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from html import escape
from pathlib import Path
from typing import Any

from ..bench.results import row_verdicts
from ..errors import InputError
from ..scores.stats import fleiss_kappa
from .csvtext import csv_records
from .formats import LabelsFormat
from .labels import Label

RATER_COLUMNS = ("id", "specialty", "years", "country")

# What each labelling tool showed the raters, as batchbench writes it for them.
BLINDING: dict[LabelsFormat, str] = {
    "sheet": "batchbench's labelling sheet (CSV or its HTML form) never holds the judge's"
    " verdicts: blind to the judge",
    "redcap": "the REDCap instrument batchbench writes holds no judge verdicts: blind to the judge",
    "label-studio": "Label Studio tasks batchbench writes carry the judge's verdicts as"
    " pre-filled predictions: not blind to the judge (unless the tasks were made without)",
    "prodigy": "Prodigy tasks: what they showed is as the team made them (not written by"
    " batchbench)",
    "healthbench": "HealthBench's physicians' labels: as its authors collected them",
}


class RatersError(InputError):
    """A raters file that cannot be read as one."""


@dataclass(frozen=True)
class Rater:
    id: str
    specialty: str
    years: float | None
    country: str


def read_raters(path: Path) -> dict[str, Rater]:
    """A raters file (CSV: ``id``, ``specialty``, ``years``, ``country``), every line
    checked: an id twice, years that are not a number, a missing column are one line."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise RatersError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise RatersError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    records = [(n, r) for n, r in csv_records(path, text, RatersError) if any(c.strip() for c in r)]
    if not records:
        raise RatersError(f"{path}: empty (a raters file: {', '.join(RATER_COLUMNS)})")
    first, head = records[0]
    header = [h.strip().lower() for h in head]
    missing = [c for c in RATER_COLUMNS if c not in header]
    if missing:
        raise RatersError(f"{path}: line {first}: no column {', '.join(missing)}")
    out: dict[str, Rater] = {}
    for n, record in records[1:]:
        row = {k: v.strip() for k, v in zip(header, record)}
        rid = row.get("id", "")
        if not rid:
            raise RatersError(f"{path}: line {n}: no id")
        if rid in out:
            raise RatersError(f"{path}: line {n}: rater {rid!r} twice")
        years: float | None = None
        if row.get("years"):
            try:
                years = float(row["years"])
            except ValueError:
                years = -1.0
            if not 0 <= years < 100:
                raise RatersError(f"{path}: line {n}: years {row['years']!r} is not 0 to 99")
        out[rid] = Rater(rid, row.get("specialty", ""), years, row.get("country", ""))
    return out


def _cohen(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Cohen's κ over (judge, physician) answers of any categories."""
    n = len(pairs)
    if not n:
        return None
    judge, physician = Counter(j for j, _ in pairs), Counter(p for _, p in pairs)
    observed = sum(1 for j, p in pairs if j == p) / n
    expected = sum(judge[c] * physician[c] for c in judge) / (n * n)
    return None if expected == 1 else (observed - expected) / (1 - expected)


def _answer(label: Label) -> str:
    return "unsure" if label.unsure else "met" if label.met else "not met"


def rating_record(
    labels: Sequence[Label],
    rows: Sequence[Mapping[str, Any]],
    raters: Mapping[str, Rater] | None = None,
    formats: Sequence[LabelsFormat] = (),
) -> dict[str, Any]:
    """The raters section of a calibration: ``labels`` with the abstentions in."""
    judged = {
        r["case_id"]: row_verdicts(r.get("decisions"))
        for r in rows
        if "score" in r and row_verdicts(r.get("decisions")) is not None
    }
    by_item: dict[tuple[str, str], list[Label]] = defaultdict(list)
    for label in labels:
        by_item[(label.case_id, label.item_id)].append(label)
    shared = [found for found in by_item.values() if len(found) > 1]
    with_unsure = [[_answer(x) for x in found] for found in shared]
    without = [[x.met for x in found if not x.unsure] for found in shared]
    pairs = [
        ("met" if (judged[x.case_id] or {})[x.item_id] else "not met", _answer(x))
        for x in labels
        if x.case_id in judged
    ]
    per_rater = []
    for rid in sorted({x.rater for x in labels}):
        mine = [x for x in labels if x.rater == rid]
        times = [x.seconds for x in mine if x.seconds is not None]
        known = (raters or {}).get(rid)
        per_rater.append(
            {
                "id": rid,
                **({k: v for k, v in asdict(known).items() if k != "id"} if known else {}),
                "in_raters_file": known is not None if raters is not None else None,
                "labels": len(mine),
                "unsure": sum(x.unsure for x in mine),
                "median_seconds": statistics.median(times) if times else None,
            }
        )
    times = [x.seconds for x in labels if x.seconds is not None]
    unsure = sum(x.unsure for x in labels)
    return {
        "raters": per_rater,
        "labels": len(labels),
        "unsure": unsure,
        "abstention_rate": unsure / len(labels) if labels else None,
        "between_raters_kappa": {
            "with_unsure": fleiss_kappa(with_unsure),
            "without_unsure": fleiss_kappa(without),
            "items": len(shared),
        },
        "judge_kappa": {
            "with_unsure": _cohen(pairs),
            "without_unsure": _cohen([p for p in pairs if p[1] != "unsure"]),
        },
        "median_seconds": statistics.median(times) if times else None,
        "timed_labels": len(times),
        "blinding": [BLINDING[f] for f in dict.fromkeys(formats)],
        "unlisted": sorted(r["id"] for r in per_rater if r["in_raters_file"] is False),
    }


def rating_lines(record: Mapping[str, Any]) -> list[str]:
    """The section in words (``calibrate``'s text)."""

    def k(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    rate = record["abstention_rate"]
    lines = [
        f"raters: {len(record['raters'])}; {record['labels']} labels, {record['unsure']} unsure"
        f" (abstention rate {'n/a' if rate is None else f'{rate:.1%}'})",
        f"  Fleiss' κ between raters on {record['between_raters_kappa']['items']} shared items:"
        f" {k(record['between_raters_kappa']['without_unsure'])} without unsure,"
        f" {k(record['between_raters_kappa']['with_unsure'])} with unsure as an answer",
        f"  Cohen's κ judge vs physicians: {k(record['judge_kappa']['without_unsure'])} without"
        f" unsure, {k(record['judge_kappa']['with_unsure'])} with unsure as a disagreement",
    ]
    if record["median_seconds"] is not None:
        lines.append(
            f"  time per label: median {record['median_seconds']:.1f} s over"
            f" {record['timed_labels']} timed labels"
        )
    for r in record["raters"]:
        who = ", ".join(
            str(v)
            for v in (
                r.get("specialty"),
                r.get("years") and f"{r['years']:g} years",
                r.get("country"),
            )
            if v
        )
        lines.append(
            f"  {r['id']}: {who or 'not described'}; {r['labels']} labels, {r['unsure']} unsure"
        )
    lines += [f"  blinding: {b}" for b in record["blinding"]]
    if record["unlisted"]:
        lines.append(f"  not in the raters file: {', '.join(record['unlisted'])}")
    return lines


def rating_html(record: Mapping[str, Any]) -> str:
    """The section as the report shows it, under its calibration."""
    first, *rest = rating_lines(record)
    items = "".join(f"<li>{escape(line.strip())}</li>" for line in rest)
    return f"<h3>The physicians as raters</h3><p>{escape(first)}</p><ul>{items}</ul>"

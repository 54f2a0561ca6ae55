"""#66.6: the physicians as raters (GRRAS) — who they were (a raters file), how blind,
how long a label took (Label Studio's ``lead_time``, read from a real export), how
often they could not tell (``unsure``, an abstention rate) and κ with and without it.

κ is checked against plain re-implementations of Fleiss' and Cohen's formulas written
here, on counts taken from the sheet itself."""

from __future__ import annotations

import hashlib
import json
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from support.cli import FIXTURE, assert_one_line_error, run_cli
from support.labelling import graded, label, sheet, write_sheet

TOOLS = FIXTURE / "label-tools"


def _fleiss(items: list[list[str]]) -> float:
    """Fleiss (1971): P̄ over items of (Σ n_ij² − m)/(m(m − 1)); chance Σ p_j²."""
    items = [i for i in items if len(i) > 1]
    p_bar = sum(
        (sum(n * n for n in Counter(i).values()) - len(i)) / (len(i) * (len(i) - 1)) for i in items
    ) / len(items)
    totals = Counter(v for i in items for v in i)
    votes = sum(totals.values())
    chance = sum((n / votes) ** 2 for n in totals.values())
    return (p_bar - chance) / (1 - chance)


def _cohen(pairs: list[tuple[str, str]]) -> float:
    n = len(pairs)
    po = sum(a == b for a, b in pairs) / n
    left, right = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    pe = sum(left[c] * right[c] for c in set(left) | set(right)) / n / n
    return (po - pe) / (1 - pe)


def _unsure(rater: str, case_id: str, item_id: str) -> bool:
    return hashlib.sha256(f"u/{rater}/{case_id}/{item_id}".encode()).digest()[0] < 40


def test_unsure_verdicts_are_an_abstention_rate_and_kappa_is_given_with_and_without_them(
    batch_emulator, tmp_path, fixture_dir
):
    jobs, judged = graded(batch_emulator, tmp_path, fixture_dir)
    note, rows = sheet(jobs, tmp_path / "s.csv", cases=10)
    labelled = label(rows, judged, ["dr_a", "dr_b", "dr_c"], 0.3)
    for row in labelled:
        if _unsure(row["rater"], row["case_id"], row["item_id"]):
            row["verdict"] = "unsure"
    write_sheet(tmp_path / "labels.csv", note, labelled)
    raters = tmp_path / "raters.csv"
    raters.write_text(
        "id,specialty,years,country\n"
        "dr_a,emergency medicine,12,UK\n"
        "dr_b,internal medicine,4,Kenya\n"
    )
    argv = ["calibrate", "ans-model", "--labels", str(tmp_path / "labels.csv"), *jobs]
    proc = run_cli(*argv, "--raters", str(raters), "--json")
    assert proc.returncode == 0, proc.stderr
    rating = json.loads(proc.stdout)["rating"]

    unsure = sum(r["verdict"] == "unsure" for r in labelled)
    assert 0 < unsure < len(labelled)  # the sheet has both: the figures below can fail
    assert rating["labels"] == len(labelled) and rating["unsure"] == unsure
    assert rating["abstention_rate"] == unsure / len(labelled)
    word = {"1": "met", "0": "not met", "unsure": "unsure"}
    by_item = defaultdict(list)
    for r in labelled:
        by_item[(r["case_id"], r["item_id"])].append(word[r["verdict"]])
    kappa = rating["between_raters_kappa"]
    assert abs(kappa["with_unsure"] - _fleiss(list(by_item.values()))) < 1e-12
    decided = [[v for v in i if v != "unsure"] for i in by_item.values()]
    assert abs(kappa["without_unsure"] - _fleiss(decided)) < 1e-12
    judge = {(c, d["item_id"]): d["matched"] for c, r in judged.items() for d in r["decisions"]}
    pairs = [
        ("met" if judge[(r["case_id"], r["item_id"])] else "not met", word[r["verdict"]])
        for r in labelled
    ]
    assert abs(rating["judge_kappa"]["with_unsure"] - _cohen(pairs)) < 1e-12
    kept = [p for p in pairs if p[1] != "unsure"]
    assert abs(rating["judge_kappa"]["without_unsure"] - _cohen(kept)) < 1e-12

    described = {r["id"]: r for r in rating["raters"]}
    assert described["dr_a"]["specialty"] == "emergency medicine"
    assert described["dr_b"]["years"] == 4 and described["dr_b"]["country"] == "Kenya"
    assert rating["unlisted"] == ["dr_c"]
    assert "blind to the judge" in rating["blinding"][0]
    text = run_cli(*argv, "--raters", str(raters)).stdout
    assert f"{unsure} unsure (abstention rate {unsure / len(labelled):.1%})" in text
    assert "not in the raters file: dr_c" in text


def test_the_time_per_label_is_label_studios_lead_time(batch_emulator, tmp_path, fixture_dir):
    """From a real Label Studio export (tests/fixtures/label-tools): the median of its
    annotations' lead_time, overall and per annotator; the tasks showed the judge's
    verdicts as predictions, and the blinding statement says so."""
    jobs, _ = graded(batch_emulator, tmp_path, fixture_dir)
    tasks = json.loads((TOOLS / "label-studio.json").read_text())
    times: dict[str, list[float]] = defaultdict(list)
    for task in tasks:
        for annotation in task.get("annotations") or []:
            if not annotation.get("was_cancelled"):
                times[annotation["completed_by"]["email"]].append(annotation["lead_time"])
    proc = run_cli(
        "calibrate", "ans-model", "--labels", str(TOOLS / "label-studio.json"), "--json", *jobs
    )
    assert proc.returncode == 0, proc.stderr
    rating = json.loads(proc.stdout)["rating"]
    every = [t for found in times.values() for t in found]
    assert rating["median_seconds"] == statistics.median(every)
    assert rating["timed_labels"] == len(every)
    for rater in rating["raters"]:
        assert rater["median_seconds"] == statistics.median(times[rater["id"]])
    assert "not blind to the judge" in rating["blinding"][0]


def test_an_unsure_choice_reads_from_label_studio(batch_emulator, tmp_path, fixture_dir):
    jobs, _ = graded(batch_emulator, tmp_path, fixture_dir)
    tasks = json.loads((TOOLS / "label-studio.json").read_text())
    tasks[0]["annotations"][0]["result"][0]["value"]["choices"] = ["unsure"]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(tasks))
    proc = run_cli("calibrate", "ans-model", "--labels", str(path), "--json", *jobs)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["rating"]["unsure"] == 1


def test_a_bad_raters_file_is_one_line_naming_the_line(batch_emulator, tmp_path, fixture_dir):
    jobs, judged = graded(batch_emulator, tmp_path, fixture_dir)
    note, rows = sheet(jobs, tmp_path / "s.csv", cases=10)
    write_sheet(tmp_path / "labels.csv", note, label(rows, judged, ["dr_a"], 0.2))
    argv = ["calibrate", "ans-model", "--labels", str(tmp_path / "labels.csv"), *jobs]
    bad: dict[str, tuple[str, ...]] = {
        "id,specialty,years,country\ndr_a,cardiology,many,UK\n": ("line 2", "years 'many'"),
        "id,specialty,years,country\ndr_a,x,1,UK\ndr_a,y,2,UK\n": ("line 3", "'dr_a' twice"),
        "id,specialty\ndr_a,x\n": ("line 1", "no column years, country"),
    }
    for n, (text, fragments) in enumerate(bad.items()):
        path = Path(tmp_path / f"raters{n}.csv")
        path.write_text(text)
        proc = run_cli(*argv, "--raters", str(path))
        assert_one_line_error(proc, str(path), *fragments)


def test_a_report_and_an_export_with_unsure_labels_show_the_raters(
    batch_emulator, tmp_path, fixture_dir
):
    """An unsure item leaves that rater's case unscored, never the command failed (a case
    score needs every item: "labelled 3 of the 4 items" was the error before)."""
    jobs, judged = graded(batch_emulator, tmp_path, fixture_dir)
    note, rows = sheet(jobs, tmp_path / "s.csv", cases=10)
    labelled = label(rows, judged, ["dr_a", "dr_b"], 0.3)
    labelled[0]["verdict"] = "unsure"
    write_sheet(tmp_path / "labels.csv", note, labelled)
    page = tmp_path / "page.html"
    labels = ["--labels", str(tmp_path / "labels.csv")]
    proc = run_cli("report", "ans-model", *labels, "-o", str(page), *jobs)
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    assert "The physicians as raters" in html and "1 unsure" in html
    out = tmp_path / "eee"
    proc = run_cli("export", "ans-model", "--format", "eee", *labels, "-o", str(out), *jobs)
    assert proc.returncode == 0, proc.stderr

"""What `calibrate` tells a reader who knows κ but not PPI++ (#47.5): a three-line verdict
first, no figure outside the scores a case can have, nothing resting on a handful of
cases printed as a finding, and a plan that says what is within reach.

Every figure a line states is re-derived here from the plain formulas of
``support/ppi.py`` and the reference scoring, or from the rule the line is written by
applied to the JSON's figures (which ``test_calibrate.py`` checks against the oracles).
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import defaultdict

import pytest
from support import ppi, reference
from support.cli import run_cli
from support.labelling import graded, grown, label, sheet, write_sheet

from batchbench.bench.dataset import load_dataset


def _physician_scores(labels, dataset):
    """Each labelled case's Y: the mean over its raters of the reference's case score."""
    by = defaultdict(lambda: defaultdict(set))
    for x in labels:
        by[x["case_id"]][x["rater"]] |= {x["item_id"]} if x["verdict"] == "1" else set()
    ds = load_dataset(dataset).by_id()
    return {
        c: sum(reference.score_case(ds[c], met)[0] for met in raters.values()) / len(raters)
        for c, raters in by.items()
    }


def _calibrate(tmp_path, jobs, note, labels, *extra):
    write_sheet(tmp_path / "labels.csv", note, labels)
    argv = ("calibrate", "ans-model", "--labels", str(tmp_path / "labels.csv"), *extra, *jobs)
    found = json.loads(run_cli(*argv, "--json").stdout)
    proc = run_cli(*argv)
    assert proc.returncode == 0, proc.stderr
    return found, proc.stdout


def test_a_small_pilot_is_a_pointer_and_no_figure_leaves_zero_to_one(
    batch_emulator, tmp_path, fixture_dir
):
    jobs, judged = graded(batch_emulator, tmp_path, fixture_dir)
    note, rows = sheet(jobs, tmp_path / "sheet.csv", cases=30)
    labels = label(rows, judged, ["dr_a"], rate=0.4)
    found, text = _calibrate(tmp_path, jobs, note, labels)
    lines = text.splitlines()
    agreement, score, more = lines[1:4]
    assert agreement.startswith("agreement: the judge agrees with the physicians at κ")
    assert "no item has two physicians' verdicts" in agreement
    judge = found["overall"]["judge"]["mean"]
    assert score.startswith(f"score: report the judge's {judge:.3f}")
    assert "fewer than 20 labelled cases in 10 of 10 benchmarks" in score
    assert "a pointer, not a finding" in score

    # What twice the labels buy, by the plain formulas: each benchmark's labelled term
    # shrinks by n / min(2n, n + N), the unlabelled one (λ² Var(f_N) / N) stays.
    y = _physician_scores(labels, fixture_dir)
    now, then = 0.0, 0.0
    for name in found["benchmarks"]:
        mine = [c for c, r in judged.items() if r["benchmark"] == name and "score" in r]
        lab = [c for c in mine if c in y]
        rest = [judged[c]["score"] for c in mine if c not in y]
        _, se, lam, _ = ppi.corrected([y[c] for c in lab], [judged[c]["score"] for c in lab], rest)
        floor = lam**2 * statistics.variance(rest) / len(rest) if lam > 0 else 0.0
        n, big_n = len(lab), len(rest)
        now += se**2
        then += floor + (se**2 - floor) * n / min(2 * n, n + big_n)
    benchmarks = len(found["benchmarks"])
    now, then = ppi.Z * math.sqrt(now) / benchmarks, ppi.Z * math.sqrt(then) / benchmarks
    assert f"from about ±{now:.3f} to ±{then:.3f}" in more
    # the fixture's benchmarks hold 3 to 7 cases: none can reach 20 labelled
    assert "10 benchmark(s) hold fewer than 20 cases and stay a pointer" in more

    intervals = re.findall(r"\[(-?\d+\.\d+), (-?\d+\.\d+)\]", text)
    assert intervals and all(0 <= float(x) <= 1 for pair in intervals for x in pair)
    table = {line.split()[0]: line for line in lines if line.split()[:1] != []}
    outside = 0
    for name, b in found["benchmarks"].items():
        k = b["corrected"]
        past = k["ci95"] is not None and (k["ci95"][0] < 0 or k["ci95"][1] > 1)
        outside += past
        assert ("†" in table[name]) is past, name
        assert table[name].split()[-2:] == ["—", "—"], name  # ρ², n_eff: not on 3 cases
    assert outside, "some normal interval on 3 cases runs past 0 or 1"
    assert "† cut at 0 or 1" in text


def test_enough_labels_make_the_corrected_score_the_one_to_report(
    batch_emulator, tmp_path, fixture_dir
):
    data = grown(fixture_dir, tmp_path / "grown", 30)
    jobs, judged = graded(batch_emulator, tmp_path, data)
    note, rows = sheet(jobs, tmp_path / "sheet.csv", cases=220)  # 22 of 30 in each
    labels = label(rows, judged, ["dr_a", "dr_b"], rate=0.4)
    found, text = _calibrate(tmp_path, jobs, note, labels)
    agreement, score, more = text.splitlines()[1:4]

    judge_f1 = statistics.mean(r["judge_f1"] for r in found["per_rater"].values())
    peers_f1 = statistics.mean(r["ceiling_f1"] for r in found["per_rater"].values())
    assert f"the judge against a physician {judge_f1:.2f}" in agreement
    assert f"a physician against the others {peers_f1:.2f}" in agreement
    closer = "at least as closely as" if judge_f1 >= peers_f1 else "less closely than"
    assert f"the judge agrees with them {closer} they agree among themselves" in agreement

    k, judge = found["overall"]["corrected"], found["overall"]["judge"]
    low, high = k["ci95"]
    assert score.startswith(
        f"score: report the corrected {k['estimate']:.3f} [{low:.3f}, {high:.3f}]"
    )
    assert "corrected by 220 physician-labelled ones" in score
    where = (
        "within" if low <= judge["mean"] <= high else "above" if judge["mean"] > high else "below"
    )
    j_low, j_high = judge["ci95"]
    assert f"the judge's {judge['mean']:.3f} [{j_low:.3f}, {j_high:.3f}] lies {where}" in score
    assert where == "above"  # the labeller takes 'met' away: the judge scores too high
    assert more.startswith("labels: twice the labelled cases") and "make it a finding" not in more

    rows_of = {line.split()[0]: line.split() for line in text.splitlines() if line.strip()}
    for name, b in found["benchmarks"].items():
        rho2, n_eff = rows_of[name][-2:]
        assert (
            rho2 == f"{b['corrected']['rho2']:.2f}"
            and n_eff == f"{b['corrected']['effective_n']:.1f}"
        )

    # the report: the verdict's lines are paragraphs, each note an item of a list
    page = tmp_path / "page.html"
    argv = ["report", "ans-model", "-o", str(page), "--labels", str(tmp_path / "labels.csv")]
    assert run_cli(*argv, *jobs).returncode == 0
    html = page.read_text()
    section = html.split("The judge against physicians: ans-model")[1]
    for line in (agreement, score, more):
        assert f"<p>{line.replace(chr(39), '&#x27;')}.</p>" in section
    assert section.count("<li>") >= 5 and "<p>n: the benchmark" not in section


def test_a_rogan_gladen_share_cut_at_zero_says_so(batch_emulator, tmp_path, fixture_dir):
    """Physicians who call met only one item the judge calls met per benchmark make the
    judge's false positives outweigh its share met wherever the labelled items are
    richer in 'met' than the benchmark's: the formula falls below 0, is cut there, and
    the text says so (and only there)."""
    jobs, judged = graded(batch_emulator, tmp_path, fixture_dir)
    for seed in range(1, 40):
        note, rows = sheet(jobs, tmp_path / "sheet.csv", cases=30, seed=seed)
        labels, first = [], set()
        for row in rows:
            met = {d["item_id"]: d["matched"] for d in judged[row["case_id"]]["decisions"]}
            yes = met[row["item_id"]] and row["benchmark"] not in first
            first |= {row["benchmark"]} if yes else set()
            labels.append({**row, "rater": "dr_a", "verdict": "1" if yes else "0"})
        expected = set()
        for name in first:
            scored = [r for r in judged.values() if r["benchmark"] == name and "score" in r]
            share = sum(d["matched"] for r in scored for d in r["decisions"]) / sum(
                len(r["decisions"]) for r in scored
            )
            negatives = [
                {d["item_id"]: d["matched"] for d in judged[x["case_id"]]["decisions"]}[
                    x["item_id"]
                ]
                for x in labels
                if x["benchmark"] == name and x["verdict"] == "0"
            ]
            specificity = 1 - sum(negatives) / len(negatives)  # sensitivity is 1 here
            if (share + specificity - 1) / specificity < 0:
                expected.add(name)
        if expected:
            break
    assert expected, "some seed labels a benchmark's richest items"
    found, text = _calibrate(tmp_path, jobs, note, labels)
    shares = text.split("Rogan–Gladen")[1].split("\n")[0]
    for name, b in found["benchmarks"].items():
        part = shares.split(f"{name} ")[1].split(";")[0] if f"{name} " in shares else ""
        assert ("cut at 0" in part) is (name in expected), name
        assert (b["rogan_gladen"]["cut"] == "at 0") is (name in expected)


def test_a_plan_out_of_reach_says_what_is_within_it(batch_emulator, tmp_path, fixture_dir):
    jobs, judged = graded(batch_emulator, tmp_path, fixture_dir)
    note, rows = sheet(jobs, tmp_path / "sheet.csv", cases=30)
    labels = label(rows, judged, ["dr_a"], rate=0.3)
    found, text = _calibrate(tmp_path, jobs, note, labels, "--plan", "--width", "0.1")
    y = _physician_scores(labels, fixture_dir)
    checked = 0
    for name, b in found["benchmarks"].items():
        mine = [c for c, r in judged.items() if r["benchmark"] == name and "score" in r]
        lab = [c for c in mine if c in y]
        args = (
            [y[c] for c in lab],
            [judged[c]["score"] for c in lab],
            [judged[c]["score"] for c in mine],
        )
        line = next(x for x in text.splitlines() if x.split()[:1] == [name])
        if b["needed"] is not None and b["needed"] <= len(mine):
            assert "narrowest" not in b and "at best" not in line
            continue
        best = ppi.half_width(*args, len(mine))
        assert b["narrowest"] == pytest.approx(best, rel=1e-9)
        wider = math.ceil(best * 100 - 1e-9) / 100
        assert b["wider"] == {"width": wider, "needed": ppi.needed(*args, wider)}
        shown = math.ceil(best * 1000 - 1e-9) / 1000  # rounded up: never the width met
        assert shown > 0.1
        assert f"with all {len(mine)} of its cases labelled ±{shown:.3f} at best," in line
        assert "wider than ±0.1" in line
        assert f"±{wider:g} takes {b['wider']['needed']}" in line
        checked += 1
    assert checked, "a width of ±0.1 is out of reach somewhere in the fixture"


def test_a_corrected_score_from_labels_that_do_not_vary_says_so():
    """#61.11: labels all alike printed `1.000 [1.000, 1.000]*`, an interval of no width
    read as certainty: it says there is no interval."""
    from batchbench.calibration.text import _corrected

    assert _corrected(1.0, [1.0, 1.0], True) == "1.000 (no spread)*"
    assert _corrected(0.5, [0.25, 0.75], False).startswith("0.500 [0.250, 0.750]")

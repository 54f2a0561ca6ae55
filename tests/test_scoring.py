"""Case scores: equal to the reference's on every golden row, types included."""

from __future__ import annotations

import json
import random

import pytest
from support import reference as plain_reference

from batchbench.bench.decisions import judge_decisions, lay_verdicts
from batchbench.bench.scoring import rubric_frame, score_joined, score_records
from batchbench.errors import InvariantError


def score_cases(cases, decisions):
    """Scores through the pipeline's own path: judge replies (in a shuffled case order;
    every other case's items in reverse, so the decisions must be put back in rubric
    order) → decisions laid on the rubric → scores."""
    replies = [
        (
            case_id,
            json.dumps(
                {
                    "decisions": [
                        {"item_id": i, "matched": m}
                        for i, m in (list(per.items())[::-1] if n % 2 else per.items())
                    ]
                }
            ),
        )
        for n, (case_id, per) in enumerate(decisions.items())
    ]
    random.Random(len(replies)).shuffle(replies)
    items = {c["case_id"]: [it["item_id"] for it in c["rubric_items"]] for c in cases}
    judged = judge_decisions(replies, rubric_frame(cases), items)
    assert judged.invalid == {}
    return score_records(score_joined(judged.decided))


def _golden_decisions(golden_dir, dataset, pattern):
    by_id = dataset.by_id()
    rows = [
        json.loads(line) for line in (golden_dir / "case_scores.jsonl").read_text().splitlines()
    ]
    rows = [r for r in rows if r["pattern"] == pattern]
    decisions = {}
    for r in rows:
        matched = set(r["matched"])
        items = by_id[r["case_id"]]["rubric_items"]
        decisions[r["case_id"]] = {it["item_id"]: it["item_id"] in matched for it in items}
    return rows, decisions


def test_every_golden_case_score_is_identical(golden_set):
    golden_dir, dataset = golden_set.golden_dir, golden_set.dataset
    checked = 0
    for pattern in ("none", "all", "random"):
        rows, decisions = _golden_decisions(golden_dir, dataset, pattern)
        got = score_cases(dataset.cases, decisions)
        for r in rows:
            score, components = got[r["case_id"]]
            # json.dumps distinguishes 0 from 0.0 and None from NaN, as the file does.
            assert json.dumps([score, components]) == json.dumps(
                [r["score"], r["score_components"]]
            ), (pattern, r["case_id"])
            checked += 1
    assert checked == 3 * len(dataset.cases)  # every case under the three patterns


def test_scores_match_an_independent_implementation_on_odd_rubrics():
    """Fractional and zero points, all-negative matches: checked against plain Python."""
    rng = random.Random(3)
    cases = []
    for c in range(60):
        method = "f1_weighted_rubric" if c % 2 else "points_rubric"
        choices = (
            [-3, -2, -1, 0, 1, 2, 3]
            if method == "f1_weighted_rubric"
            else [-2, -1.5, -0.25, 0, 0.5, 1, 1.75, 3]
        )
        items = [
            {"item_id": f"h{c}_{i}", "text": "t", "points": rng.choice(choices)}
            for i in range(rng.randint(1, 12))
        ]
        if method == "points_rubric":
            items[0]["points"] = 1.5
        cases.append({"case_id": f"c{c}", "grading_method": method, "rubric_items": items})
    for case_id, (score, components), expected in _both_ways(rng, cases):
        assert score == expected[0]
        for key, value in expected[1].items():
            assert components[key] == value, (case_id, key)


def _both_ways(rng: random.Random, cases: list[dict]) -> list[tuple[str, tuple, tuple]]:
    """Random verdicts for every case, scored by the pipeline's path and by the plain
    reference: ``(case_id, ours, the reference's)``."""
    decisions = {
        c["case_id"]: {it["item_id"]: rng.random() < 0.5 for it in c["rubric_items"]} for c in cases
    }
    got = score_cases(cases, decisions)
    return [
        (
            case["case_id"],
            got[case["case_id"]],
            plain_reference.score_case(
                case, {i for i, m in decisions[case["case_id"]].items() if m}
            ),
        )
        for case in cases
    ]


@pytest.mark.parametrize("seed", range(3))
def test_whole_points_are_summed_at_once_to_the_references_very_bits(seed):
    """Whole points (the usual rubric) are summed all at once, not item by item: the
    sums must still be the reference's to the bit and the sign of zero, huge ones too."""
    rng = random.Random(seed)
    choices = [-3, -2, -1, 0, 1, 2, 3, -0.0, 0.0, 2.0**45, -(2.0**45), 10**15, 7.0]
    cases = []
    for c in range(80):
        method = "f1_weighted_rubric" if c % 3 == 0 else "points_rubric"
        items = [
            {"item_id": f"w{c}_{i}", "text": "t", "points": rng.choice(choices)}
            for i in range(rng.randint(1, 9))
        ]
        if method == "points_rubric" and rng.random() < 0.8:
            items[0]["points"] = 2
        elif method == "points_rubric":
            items = [{"item_id": f"w{c}_0", "text": "t", "points": 1}]
            items += [{"item_id": f"w{c}_1", "text": "t", "points": -0.0}]
        cases.append({"case_id": f"w{c}", "grading_method": method, "rubric_items": items})
    for case_id, ours, expected in _both_ways(rng, cases):
        assert json.dumps(ours) == json.dumps(expected), case_id


def test_fractional_points_are_summed_in_rubric_order_like_the_reference():
    """Points such as 0.1 do not add exactly: any order but left to right changes the
    last bit of a sum, so each sum must be the reference's own, bit for bit."""
    rng = random.Random(11)
    cases = []
    for c in range(40):
        items = [
            {"item_id": f"f{c}_{i}", "text": "t", "points": rng.choice([0.1, 0.7, 1.3, -0.3, 2.9])}
            for i in range(rng.randint(60, 200))
        ]
        cases.append({"case_id": f"f{c}", "grading_method": "points_rubric", "rubric_items": items})
    decisions = {
        c["case_id"]: {it["item_id"]: rng.random() < 0.6 for it in c["rubric_items"]} for c in cases
    }
    got = score_cases(cases, decisions)
    for case in cases:
        matched = {i for i, m in decisions[case["case_id"]].items() if m}
        score, components = plain_reference.score_case(case, matched)
        assert json.dumps(got[case["case_id"]]) == json.dumps([score, components]), case["case_id"]


def test_verdicts_that_do_not_cover_their_rubric_are_a_bug_not_a_score():
    """Laying decisions on the rubric rows relies on each case's verdicts being its
    rubric's items in order (the parser checks it): a case short of one stops with
    InvariantError instead of shifting every later case's decisions."""
    cases = [
        {"case_id": c, "grading_method": "points_rubric", "rubric_items": items}
        for c, items in (
            ("a", [{"item_id": "a_0", "points": 1}, {"item_id": "a_1", "points": 2}]),
            ("b", [{"item_id": "b_0", "points": 3}]),
        )
    ]
    rubric = rubric_frame(cases)
    laid = lay_verdicts({"b": [True], "a": [False, True]}, rubric)
    assert laid["matched"].to_list() == [False, True, True]  # rubric order, not the dict's
    with pytest.raises(InvariantError):
        lay_verdicts({"a": [True], "b": [True]}, rubric)

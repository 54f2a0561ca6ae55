"""batchbench compare: the paired bootstrap against a plain re-implementation of its
definition, bit for bit; comparing a run with itself; refusals."""

from __future__ import annotations

import json

import plain_reference
import pytest
from conftest import FIXTURE, assert_one_line_error, run_cli

DATASET = FIXTURE / "dataset"


def _rows(name: str) -> list[dict]:
    text = (FIXTURE / "golden" / f"{name}.jsonl").read_text()
    return [json.loads(x) for x in text.split("\n") if x.strip()]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _paired_by_benchmark(a_rows, b_rows, order):
    """Cases with a successful row in both, per benchmark, in registry order."""

    def last_ok(rows):
        return {r["case_id"]: r for r in rows if "score" in r and "error" not in r}

    a, b = last_ok(a_rows), last_ok(b_rows)
    ab, bb = {}, {}
    for case in order:
        if case["case_id"] in a and case["case_id"] in b:
            ab.setdefault(case["benchmark"], []).append(a[case["case_id"]]["score"])
            bb.setdefault(case["benchmark"], []).append(b[case["case_id"]]["score"])
    return ab, bb, len(set(a) ^ set(b))


def test_the_paired_bootstrap_equals_a_plain_implementation(tmp_path, fixture_dataset):
    full, uneven = _rows("full"), _rows("uneven")
    for r in uneven:  # same judge and protocol; another model whose scores differ
        r["answer_model"] = "model-b"
    a = _write(tmp_path / "a.jsonl", full)
    b = _write(tmp_path / "b.jsonl", uneven)
    proc = run_cli(
        "compare", str(a), str(b), "--dataset", str(DATASET), "--baseline", "b",
        "--bootstrap-samples", "400", "--bootstrap-seed", "7", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    [comparison] = got["comparisons"]
    ab, bb, excluded = _paired_by_benchmark(full, uneven, fixture_dataset.cases)
    expected = plain_reference.paired_difference(ab, bb, samples=400, seed=7)
    assert excluded > 0 and len({len(v) for v in ab.values()}) > 1  # uneven, with exclusions
    assert comparison["excluded_cases"] == excluded
    assert comparison["paired_cases"] == sum(len(v) for v in ab.values())
    assert json.dumps(comparison["benchmarks"]) == json.dumps(expected["benchmarks"])
    assert json.dumps(comparison["overall"]) == json.dumps(expected["overall"])
    assert [r["name"] for r in got["runs"]] == ["a", "b"] and got["baseline"] == "b"
    # The leaderboard is each run's own summary, as summarize writes it.
    summary = run_cli("summarize", str(a), "--dataset", str(DATASET), "--json").stdout
    assert got["runs"][0]["overall_ci95"] == json.loads(summary)["overall_ci95"]


def test_equal_strata_take_the_summary_fast_path_and_still_agree(tmp_path, fixture_dataset):
    kept: dict[str, int] = {}
    three = []  # the first three scored cases of each benchmark: equal strata
    for r in _rows("full"):
        if "score" in r and kept.get(r["benchmark"], 0) < 3:
            kept[r["benchmark"]] = kept.get(r["benchmark"], 0) + 1
            three.append(r)
    other = [dict(r, score=round(1 - r["score"], 4)) for r in three]
    for r in other:
        r.pop("decisions", None)
        r.pop("score_components", None)
    a = _write(tmp_path / "a.jsonl", three)
    b = _write(tmp_path / "b.jsonl", other)
    args = ["compare", str(a), str(b), "--dataset", str(DATASET), "--json", "--baseline", "b"]
    got = json.loads(run_cli(*args, "--bootstrap-samples", "300").stdout)["comparisons"][0]
    ab, bb, _ = _paired_by_benchmark(three, other, fixture_dataset.cases)
    assert {len(v) for v in ab.values()} == {3}
    expected = plain_reference.paired_difference(ab, bb, samples=300, seed=42)
    assert json.dumps(got["overall"]) == json.dumps(expected["overall"])
    assert json.dumps(got["benchmarks"]) == json.dumps(expected["benchmarks"])


def test_a_run_compared_with_itself_differs_by_nothing(tmp_path):
    a = _write(tmp_path / "a.jsonl", _rows("full"))
    b = _write(tmp_path / "a2.jsonl", _rows("full"))
    got = json.loads(
        run_cli("compare", str(a), str(b), "--dataset", str(DATASET), "--json").stdout
    )["comparisons"][0]
    assert got["excluded_cases"] == 0
    for v in [got["overall"], *got["benchmarks"].values()]:
        assert v["diff"] == 0 and v["ci95"] == [0, 0] and v["share_a_better"] == 0


@pytest.mark.parametrize(
    "field,value,fragment",
    [
        ("judge_model", "another-judge", "another judge model"),
        ("protocol_version", "bedside-bench-grading-v2", "another protocol version"),
    ],
)
def test_runs_that_are_not_comparable_are_refused(tmp_path, field, value, fragment):
    a = _write(tmp_path / "a.jsonl", _rows("full"))
    b = _write(tmp_path / "b.jsonl", [dict(r, **{field: value}) for r in _rows("full")])
    proc = run_cli("compare", str(a), str(b), "--dataset", str(DATASET))
    assert_one_line_error(proc, "b and a", fragment)


def test_runs_with_no_case_scored_in_both_are_refused(tmp_path):
    rows = [r for r in _rows("full") if "score" in r]
    a = _write(tmp_path / "a.jsonl", rows[: len(rows) // 2])
    b = _write(tmp_path / "b.jsonl", rows[len(rows) // 2 :])
    proc = run_cli("compare", str(a), str(b), "--dataset", str(DATASET))
    assert_one_line_error(proc, "no case scored in both")


def test_a_results_file_needs_its_dataset(tmp_path):
    a = _write(tmp_path / "a.jsonl", _rows("full"))
    proc = run_cli("compare", str(a), str(a))
    assert_one_line_error(proc, "needs --dataset")

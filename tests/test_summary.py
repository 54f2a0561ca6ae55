"""The summary: byte-identical to the reference's golden files, by API and by CLI."""

from __future__ import annotations

import inspect
import json
import random
import shutil

import numpy as np
import pytest
from support import reference as plain_reference
from support.cli import REPO, assert_one_line_error, run_cli

from batchbench import summarize
from batchbench.bench.dataset import select_cases
from batchbench.scores.summary_file import summary_json

GOLDEN = [("full", False), ("uneven", False), ("smoke", True)]


@pytest.mark.parametrize("name,smoke", GOLDEN)
def test_python_api_equals_golden(golden_set, name, smoke):
    golden_dir, dataset = golden_set.golden_dir, golden_set.dataset
    rows = [json.loads(line) for line in (golden_dir / f"{name}.jsonl").read_text().splitlines()]
    expected_ids = [c["case_id"] for c in select_cases(dataset, smoke=smoke)]
    got = summarize(rows, expected_case_ids=expected_ids, dataset_sha256=dataset.sha256)
    assert summary_json(got) == (golden_dir / f"{name}.summary.json").read_text()


def test_summarize_signature():
    params = inspect.signature(summarize).parameters
    assert list(params) == ["rows", "samples", "seed", "expected_case_ids", "dataset_sha256"]
    assert params["samples"].default == 10000 and params["seed"].default == 42


@pytest.mark.parametrize("name,smoke", GOLDEN)
def test_cli_writes_byte_identical_summary(tmp_path, golden_set, name, smoke):
    golden_dir, dataset_dir = golden_set.golden_dir, golden_set.dataset_dir
    results = tmp_path / f"{name}.jsonl"
    shutil.copy(golden_dir / f"{name}.jsonl", results)
    args = ["summarize", str(results), "--dataset", str(dataset_dir)]
    proc = run_cli(*args, *(["--smoke"] if smoke else []))
    assert proc.returncode == 0, proc.stderr
    written = (tmp_path / f"{name}.summary.json").read_bytes()
    assert written == (golden_dir / f"{name}.summary.json").read_bytes()
    assert "overall (macro)" in proc.stdout
    proc = run_cli(*args, "--json", *(["--smoke"] if smoke else []))
    assert proc.stdout.encode() == written


def test_cli_selection_options_change_the_expected_cases(tmp_path, golden_dir, dataset_dir):
    results = tmp_path / "full.jsonl"
    shutil.copy(golden_dir / "full.jsonl", results)
    proc = run_cli(
        "summarize",
        str(results),
        "--dataset",
        str(dataset_dir),
        "--json",
        "--benchmark",
        "drug_safety",
        "--limit",
        "5",
        "--bootstrap-samples",
        "200",
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert list(summary["benchmarks"]) == ["drug_safety"]
    assert summary["completed_cases"] + summary["errors"] <= 5
    assert summary["bootstrap_samples"] == 200


def _random_rows(rng, sizes):
    rows = []
    for b, n in enumerate(sizes):
        for i in range(n):
            rows.append(
                {
                    "case_id": f"{b}-{i}",
                    "benchmark": f"b{b}",
                    "answer_model": "a",
                    "judge_model": "j",
                    "answer_temperature": None,
                    "judge_temperature": 0,
                    "started_at": f"2026-01-01T00:00:{i % 60:02d}+00:00",
                    "finished_at": f"2026-01-01T00:01:{i % 60:02d}+00:00",
                    "score": rng.choice([0.0, 1.0, rng.random(), round(rng.random(), 4)]),
                }
            )
    return rows


@pytest.mark.parametrize(
    "sizes",
    [[1], [2, 3], [7, 7, 7], [5, 64, 65, 1, 33], [25, 24, 25, 23, 25, 12, 25, 25, 25, 20]],
)
@pytest.mark.parametrize("block", [None, 1, 97])
@pytest.mark.parametrize("segments", [0, 10**9], ids=["stratum by stratum", "walked"])
def test_bootstrap_matches_plain_python_for_any_sizes(sizes, block, segments, monkeypatch):
    """Bit for bit the reference's, however many resamples are drawn at once (a block of
    one draw, of 97, or the default: memory bounded for 25,000 cases, #38), and however
    unequal strata are drawn (each stratum's picks in turn, or walked over a block)."""
    from batchbench.scores import summary as summary_module

    monkeypatch.setattr(summary_module, "SEGMENTS_OVER", segments)
    if block is not None:
        monkeypatch.setattr(summary_module, "BLOCK_PICKS", block)
    rng = random.Random(sum(sizes))
    rows = _random_rows(rng, sizes)
    rng.shuffle(rows)
    for seed in (42, 7):
        fast = summarize(rows, samples=300, seed=seed)
        plain = plain_reference.summarize(rows, samples=300, seed=seed)
        assert summary_json(fast) == summary_json(plain)


def test_last_successful_row_wins_and_last_error_counts():
    rows = [
        {"case_id": "a", "benchmark": "x", "score": 0.1, "answer_model": "m", "judge_model": "j"},
        {"case_id": "a", "benchmark": "x", "score": 0.9, "answer_model": "m", "judge_model": "j"},
        {"case_id": "b", "benchmark": "x", "error": "E: boom", "finished_at": "z"},
        {"case_id": "c", "benchmark": "x", "error": "E: boom"},
        {"case_id": "c", "benchmark": "x", "score": 0.5, "answer_model": "m", "judge_model": "j"},
    ]
    s = summarize(rows, samples=50)
    assert s["completed_cases"] == 2 and s["errors"] == 1
    assert s["benchmarks"]["x"]["mean"] == pytest.approx(0.7)
    assert s["finished_at"] == "z"


def test_malformed_results_line_names_its_number(tmp_path):
    results = tmp_path / "r.jsonl"
    results.write_text('{"case_id": "a", "benchmark": "x", "score": 1.0}\n{not json\n')
    proc = run_cli("summarize", str(results))
    assert_one_line_error(proc, "r.jsonl", "line 2")
    assert not (tmp_path / "r.summary.json").exists()


@pytest.mark.parametrize(
    "line,fragment",
    [
        ('["a list"]', "expected a JSON object"),
        ('{"benchmark": "x", "score": 1}', "case_id"),
        ('{"case_id": "a", "benchmark": "x", "score": "high"}', "score"),
        ('{"case_id": "a", "benchmark": "x"}', "neither 'score' nor 'error'"),
    ],
)
def test_bad_results_rows(tmp_path, line, fragment):
    results = tmp_path / "r.jsonl"
    results.write_text(line + "\n")
    proc = run_cli("summarize", str(results))
    assert_one_line_error(proc, "line 1", fragment)


def test_missing_results_file(tmp_path):
    proc = run_cli("summarize", str(tmp_path / "nope.jsonl"))
    assert_one_line_error(proc, "nope.jsonl", "not found")


# Hostile results files: summarize refuses to publish impossible numbers. ------------

FIXTURE = REPO / "tests" / "fixtures"


def _golden_rows() -> list[dict]:
    text = (FIXTURE / "golden" / "full.jsonl").read_text()
    return [json.loads(x) for x in text.split("\n") if x.strip()]


def _first_scored(rows: list[dict]) -> int:
    return next(i for i, r in enumerate(rows) if "score" in r)


def _mutate(kind: str) -> tuple[str, list[str]]:
    """A golden results file broken one way, as text, and what the refusal must say."""
    rows = _golden_rows()
    i = _first_scored(rows)
    line = f"line {i + 1}"
    row = rows[i]
    if kind == "score above 1":
        row["score"] = 1.5
        return _dump(rows), [line, "from 0 to 1, got 1.5"]
    if kind == "infinite score":
        return _dump(rows).replace(
            f'"score": {json.dumps(row["score"])},', '"score": Infinity,', 1
        ), [
            line,
            "got inf",
        ]
    if kind == "score as text":
        row["score"] = "0.5"
        return _dump(rows), [line, "must be a number, got '0.5'"]
    if kind == "another benchmark":
        row["benchmark"] = "cardiology"
        return _dump(rows), [line, row["case_id"], "'cardiology' is not the dataset's"]
    if kind == "another grading method":
        other = {"points_rubric": "f1_weighted_rubric", "f1_weighted_rubric": "points_rubric"}
        row["grading_method"] = other[row["grading_method"]]
        return _dump(rows), [line, "grading_method"]
    if kind == "decisions that score otherwise":
        d = next(d for d in row["decisions"] if d["points"] > 0)
        d["matched"] = not d["matched"]
        return _dump(rows), [line, row["case_id"], "is not what its decisions score"]
    if kind == "decisions of other items":
        row["decisions"] = row["decisions"][1:]
        return _dump(rows), [line, "do not name the case's rubric items"]
    if kind == "empty file":
        return "", ["no row for any of the"]
    if kind == "whitespace":
        return "  \n\n \t\n", ["no row for any of the"]
    if kind == "another dataset's rows":
        for r in rows:
            r["case_id"] = "x" + r["case_id"]
        return _dump(rows), ["no row for any of the"]
    if kind == "nested too deeply":
        return _dump(rows) + "[" * 100_000 + "]" * 100_000 + "\n", ["nested too deeply"]
    if kind == "a huge integer":
        row["score"] = "HUGE"
        return _dump(rows).replace('"HUGE"', "1" + "0" * 5000), ["unreadable JSON"]
    raise AssertionError(kind)


def _dump(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


KINDS = [
    "score above 1",
    "infinite score",
    "score as text",
    "another benchmark",
    "another grading method",
    "decisions that score otherwise",
    "decisions of other items",
    "empty file",
    "whitespace",
    "another dataset's rows",
    "nested too deeply",
    "a huge integer",
]


@pytest.mark.parametrize("kind", KINDS)
def test_summarize_refuses_impossible_rows(tmp_path, kind):
    text, fragments = _mutate(kind)
    results = tmp_path / "r.jsonl"
    results.write_text(text)
    proc = run_cli("summarize", str(results), "--dataset", str(FIXTURE / "dataset"))
    assert_one_line_error(proc, "r.jsonl", *fragments)
    assert not (tmp_path / "r.summary.json").exists()


def test_summarize_without_a_dataset_refuses_an_empty_file(tmp_path):
    results = tmp_path / "r.jsonl"
    results.write_text("\n")
    assert_one_line_error(run_cli("summarize", str(results)), "r.jsonl", "no rows")


def test_duplicate_successful_rows_last_counts_and_is_said(tmp_path):
    rows = _golden_rows()
    i = _first_scored(rows)
    again = dict(rows[i])
    results = tmp_path / "r.jsonl"
    results.write_text(_dump([*rows, again]))
    proc = run_cli("summarize", str(results), "--dataset", str(FIXTURE / "dataset"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert "1 case(s) have several successful rows; the last of each counts" in proc.stderr
    assert proc.stdout == (FIXTURE / "golden" / "full.summary.json").read_text()


def test_a_bootstrap_too_large_to_draw_is_refused(tmp_path):
    results = tmp_path / "r.jsonl"
    results.write_text(_dump(_golden_rows()))
    proc = run_cli(
        "summarize",
        str(results),
        "--dataset",
        str(FIXTURE / "dataset"),
        "--bootstrap-samples",
        str(10**9),
    )
    assert_one_line_error(proc, "--bootstrap-samples 1000000000", "are drawn here")


def test_summarize_never_replaces_another_selection_or_digest(tmp_path):
    results = tmp_path / "r.jsonl"
    results.write_text(_dump(_golden_rows()))
    dataset = str(FIXTURE / "dataset")
    assert run_cli("summarize", str(results), "--dataset", dataset).returncode == 0
    full = (tmp_path / "r.summary.json").read_bytes()
    for extra in (["--smoke"], ["--benchmark", "drug_safety"], []):
        args = ["summarize", str(results), *(["--dataset", dataset] if extra else []), *extra]
        proc = run_cli(*args)
        assert_one_line_error(proc, "r.summary.json", "--output", "--force")
        assert (tmp_path / "r.summary.json").read_bytes() == full
    proc = run_cli(
        "summarize", str(results), "--dataset", dataset, "--smoke", "-o", str(tmp_path / "s.json")
    )
    assert proc.returncode == 0 and (tmp_path / "s.json").exists()
    proc = run_cli("summarize", str(results), "--dataset", dataset, "--smoke", "--force")
    assert proc.returncode == 0 and (tmp_path / "r.summary.json").read_bytes() != full


@pytest.mark.parametrize("equal_strata", [True, False])
def test_two_runs_resampled_at_once_are_each_bit_for_bit_its_own(equal_strata):
    """The paired comparison gathers both runs' scores in one pass (as one complex
    number each): every run's means must be exactly those of its own pass, on scores
    whose sums round at every step."""
    from batchbench.scores.summary import (
        WordStream,
        paired_means,
        sequential_means,
        stratified_means,
    )

    rng = np.random.default_rng(3)
    a = rng.choice([1 / 3, 0.1, 1e-17, 1e16, -0.0, 0.7], size=37)
    b = rng.random(37) * 1e-3
    picks = rng.integers(0, 37, size=(50, 37))
    ma, mb = paired_means(a, b, picks)
    assert np.array_equal(ma, sequential_means(a, picks))
    assert np.array_equal(mb, sequential_means(b, picks))
    sizes = [12, 12, 12] if equal_strata else [5, 12, 20]
    cut = np.cumsum(sizes)[:-1]
    sa, sb = np.split(a[: sum(sizes)], cut), np.split(b[: sum(sizes)], cut)
    with WordStream(9, 10**6) as s1, WordStream(9, 10**6) as s2, WordStream(9, 10**6) as s3:
        pa, pb = stratified_means([sa, sb], s1, 40)
        [alone_a] = stratified_means([sa], s2, 40)
        [alone_b] = stratified_means([sb], s3, 40)
    assert np.array_equal(pa, alone_a) and np.array_equal(pb, alone_b)


@pytest.mark.parametrize("rows", [40, 1100], ids=["running sums", "vector per position"])
def test_resample_means_are_pythons_own_left_to_right_sum(rows):
    """The rule the reference follows (``sum(picked) / n``: Python's ``sum``, from the int
    0, strictly left to right), on values whose sums round differently in any other
    order, and a row of nothing but -0.0 (Python's sum of it is 0.0); few rows and many
    (each way of summing)."""
    from batchbench.scores.summary import WIDE_ROWS, sequential_means

    assert rows < WIDE_ROWS or rows >= WIDE_ROWS + 64  # a part-block of rows too
    rng = np.random.default_rng(5)
    values = rng.choice([1 / 3, 0.1, 1e-17, 1e16, -1e16, 0.7, 2.5e-3], size=300)
    values[7] = -0.0
    picks = rng.integers(0, 300, size=(rows, 300))
    picks[3] = 7  # every pick the -0.0
    got = sequential_means(values, picks)
    plain = values.tolist()
    want = [sum(plain[i] for i in row) / 300 for row in picks.tolist()]
    assert [repr(float(x)) for x in got] == [repr(x) for x in want]

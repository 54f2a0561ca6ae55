"""The summary: byte-identical to the reference's golden files, by API and by CLI."""

from __future__ import annotations

import inspect
import json
import random
import shutil

import plain_reference
import pytest
from conftest import assert_one_line_error, run_cli

from batchbench import summarize
from batchbench.dataset import select_cases
from batchbench.report import summary_json

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
    proc = run_cli(*args, *(["--smoke"] if smoke else []), real=True)
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
def test_bootstrap_matches_plain_python_for_any_sizes(sizes):
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

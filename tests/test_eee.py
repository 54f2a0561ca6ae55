"""``export --format eee``: Every Eval Ever records, checked against the schema's own files.

The aggregate record and each per-case line are validated with ``jsonschema`` against
the EvalEval Coalition's schema 0.3.0 (``fixtures/eee``, copied unchanged), plus what
its validator checks beyond the schema (the samples file's path, checksum and row
count, the instance records' keys). The numbers come from the plain reference
(``support/reference.py``) and the PPI++ formulas (``support/ppi.py``), never from
batchbench's own output.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from pathlib import Path

import pytest
from support import ppi, reference
from support.cli import assert_one_line_error, run_cli
from support.runs import run_args

from batchbench.bench.dataset import load_dataset

jsonschema = pytest.importorskip("jsonschema")
SCHEMAS = Path(__file__).parent / "fixtures" / "eee"


def _validator(name: str):
    schema = json.loads((SCHEMAS / name).read_text())
    return jsonschema.Draft7Validator(schema)


def _run(batch_emulator, tmp_path, fixture_dir) -> tuple[list[str], list[dict]]:
    proc = run_cli(
        *run_args(batch_emulator, tmp_path, fixture_dir),
        env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": ""},
    )
    assert proc.returncode == 0, proc.stderr
    results = tmp_path / "jobs" / "ans-model" / "results.jsonl"
    return ["--jobs-dir", str(tmp_path / "jobs")], [json.loads(x) for x in results.open()]


def _export(jobs: list[str], out: Path, *extra: str) -> tuple[dict, list[dict], Path]:
    proc = run_cli("export", "ans-model", "--format", "eee", "-o", str(out), *jobs, *extra)
    assert proc.returncode == 0, proc.stderr
    [record] = out.glob("data/*/*/*/*.json")
    aggregate = json.loads(record.read_text())
    samples = out / aggregate["detailed_evaluation_results"]["file_path"]
    return aggregate, [json.loads(x) for x in samples.read_text().splitlines()], samples


def test_the_records_meet_the_schema_and_carry_the_references_numbers(
    batch_emulator, tmp_path, fixture_dir
):
    jobs, rows = _run(batch_emulator, tmp_path, fixture_dir)
    aggregate, instances, samples = _export(jobs, tmp_path / "eee")
    errors = sorted(_validator("eval.schema.json").iter_errors(aggregate), key=str)
    assert not errors, [e.message for e in errors]
    each = _validator("instance_level_eval.schema.json")
    for line in instances:
        assert not list(each.iter_errors(line)), line["sample_id"]
    # What Every Eval Ever's validator checks beyond the schema.
    details = aggregate["detailed_evaluation_results"]
    assert details["checksum"] == hashlib.sha256(samples.read_bytes()).hexdigest()
    assert details["total_rows"] == len(instances)
    run_id = json.loads((tmp_path / "jobs" / "ans-model" / "run.json").read_text())["run_id"]
    record = samples.with_name(samples.name.replace("_samples.jsonl", ".json"))
    assert record.name.replace("-", "").startswith(run_id)
    assert record.parent.relative_to(tmp_path / "eee").parts[:2] == ("data", "bedside-bench")
    assert {line["evaluation_id"] for line in instances} == {aggregate["evaluation_id"]}

    scored = [r for r in rows if "score" in r]
    assert sorted(line["sample_id"] for line in instances) == sorted(r["case_id"] for r in scored)
    summary = reference.summarize(rows)
    by_id = {r["evaluation_result_id"]: r for r in aggregate["evaluation_results"]}
    for name, bench in summary["benchmarks"].items():
        found = by_id[f"bedside-bench.{name}"]["score_details"]
        scores = [r["score"] for r in scored if r["benchmark"] == name]
        assert found["score"] == pytest.approx(bench["mean"], rel=1e-12)
        interval = found["uncertainty"]["confidence_interval"]
        assert [interval["lower"], interval["upper"]] == pytest.approx(bench["ci95"], rel=1e-12)
        assert found["uncertainty"]["num_bootstrap_samples"] == 10000
        if len(scores) > 1:
            se = statistics.stdev(scores) / math.sqrt(len(scores))
            assert found["uncertainty"]["standard_error"]["value"] == pytest.approx(se)
    overall = by_id["bedside-bench.overall"]["score_details"]
    assert overall["score"] == pytest.approx(summary["overall_macro_mean"], rel=1e-12)
    judges = aggregate["evaluation_results"][0]["metric_config"]["llm_scoring"]["judges"]
    assert judges[0]["model_info"]["name"] == "judge-model" and judges[0]["temperature"] == 0
    assert aggregate["model_info"]["name"] == "ans-model"
    fingerprint = aggregate["eval_library"]["additional_details"]
    assert fingerprint["dataset_sha256"] == load_dataset(fixture_dir).sha256
    assert fingerprint["protocol_version"] == "bedside-bench-grading-v1"
    case = load_dataset(fixture_dir).by_id()[instances[0]["sample_id"]]
    assert instances[0]["input"]["raw"] == case["prompt"]
    assert instances[0]["evaluation"]["is_correct"] == (instances[0]["evaluation"]["score"] >= 1)


def test_labels_add_each_benchmarks_calibrated_score(batch_emulator, tmp_path, fixture_dir):
    import csv

    jobs, rows = _run(batch_emulator, tmp_path, fixture_dir)
    proc = run_cli(
        "calibrate", "sheet", "ans-model", "--cases", "30", "-o", str(tmp_path / "s.csv"), *jobs
    )
    assert proc.returncode == 0, proc.stderr
    from support.labelling import sheet_rows

    note, sheet = sheet_rows(tmp_path / "s.csv")
    judged = {r["case_id"]: r for r in rows}
    filled = []
    for row in sheet:  # one physician who agrees with the judge but for every third item
        verdicts = {d["item_id"]: d["matched"] for d in judged[row["case_id"]]["decisions"]}
        met = verdicts[row["item_id"]] != (
            int(hashlib.md5(row["item_id"].encode()).hexdigest(), 16) % 3 == 0
        )
        filled.append({**row, "rater": "dr_a", "verdict": "1" if met else "0"})
    with (tmp_path / "labels.csv").open("w", newline="") as fh:
        fh.write(note + "\n")
        writer = csv.DictWriter(fh, fieldnames=list(filled[0]))
        writer.writeheader()
        writer.writerows(filled)
    aggregate, _, _ = _export(jobs, tmp_path / "eee", "--labels", str(tmp_path / "labels.csv"))
    assert not list(_validator("eval.schema.json").iter_errors(aggregate))
    ds = load_dataset(fixture_dir).by_id()
    y: dict[str, set] = {}
    for label in filled:
        y.setdefault(label["case_id"], set())
        if label["verdict"] == "1":
            y[label["case_id"]].add(label["item_id"])
    physician = {c: reference.score_case(ds[c], m)[0] for c, m in y.items()}
    calibrated = {
        r["evaluation_result_id"]: r
        for r in aggregate["evaluation_results"]
        if r["evaluation_result_id"].endswith(".calibrated")
    }
    assert calibrated
    for result_id, result in calibrated.items():
        name = result_id.split(".")[1]
        mine = [c for c, r in judged.items() if r["benchmark"] == name and "score" in r]
        lab = [c for c in mine if c in physician]
        theta, _, _, _ = ppi.corrected(
            [physician[c] for c in lab],
            [judged[c]["score"] for c in lab],
            [judged[c]["score"] for c in mine if c not in physician],
        )
        assert result["score_details"]["score"] == pytest.approx(theta, rel=1e-12, abs=1e-15)
        # #63.6: the judgement goes with the figure (20 labelled cases for it to hold)
        said = result["score_details"]["details"]
        assert said["labelled_cases"] == str(len(lab))
        assert said["reliable"] == ("true" if len(lab) >= 20 else "false")
        assert ("a pointer, not a finding" in said.get("caveat", "")) == (len(lab) < 20)
    assert any(r["score_details"]["details"]["reliable"] == "false" for r in calibrated.values())


def test_a_results_file_is_refused_in_one_line(batch_emulator, tmp_path, fixture_dir):
    jobs, _ = _run(batch_emulator, tmp_path, fixture_dir)
    results = tmp_path / "jobs" / "ans-model" / "results.jsonl"
    proc = run_cli("export", str(results), "--format", "eee", "-o", str(tmp_path / "x"), *jobs)
    assert_one_line_error(proc, "--format eee", "runs (by name)")


@pytest.mark.parametrize("damage", ["edited", "stale"])
def test_a_summary_that_disagrees_with_its_rows_states_no_figure(
    damage, batch_emulator, tmp_path, fixture_dir
):
    """#45.5: a summary edited by hand, or left stale by rows written since, is checked
    against the rows before anything is exported from it: the export carries the rows'
    own figures (the plain reference's), says so in one line, and status shows none."""
    jobs, rows = _run(batch_emulator, tmp_path, fixture_dir)
    run = tmp_path / "jobs" / "ans-model"
    summary_path = run / "results.summary.json"
    summary = json.loads(summary_path.read_text())
    if damage == "edited":
        name = sorted(summary["benchmarks"])[0]
        summary["benchmarks"][name]["mean"] += 0.1
        summary_path.write_text(json.dumps(summary, indent=2) + "\n")
        field = f"benchmarks.{name}.mean"
    else:  # a row the summary counted is gone (its case written again since, say)
        rows = rows[:-1]
        (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        field = "completed_cases"
    proc = run_cli("export", "ans-model", "--format", "eee", "-o", str(tmp_path / "e"), *jobs)
    assert proc.returncode == 0, proc.stderr
    assert "does not summarise its run's rows" in proc.stderr and field in proc.stderr
    [record] = (tmp_path / "e").glob("data/*/*/*/*.json")
    results = json.loads(record.read_text())["evaluation_results"]
    by_id = {r["evaluation_result_id"]: r for r in results}
    expected = reference.summarize(rows)
    for name, bench in expected["benchmarks"].items():
        found = by_id[f"bedside-bench.{name}"]["score_details"]
        assert found["score"] == pytest.approx(bench["mean"], rel=1e-12)
        interval = found["uncertainty"]["confidence_interval"]
        assert [interval["lower"], interval["upper"]] == pytest.approx(bench["ci95"], rel=1e-12)
    page = run_cli("report", "ans-model", *jobs, "-o", str(tmp_path / "report.html"))
    assert page.returncode == 0 and "does not summarise its run's rows" in page.stderr
    # status reads no rows: it checks the summary's counts against the journal's.
    summary["completed_cases"] -= 1
    summary_path.write_text(json.dumps(summary, indent=2) + "\n")
    status = json.loads(run_cli("status", "ans-model", *jobs, "--json").stdout)
    assert "overall_macro_mean" not in status and "stale or edited" in status["summary_problem"]

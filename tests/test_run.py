"""`batchbench run` end to end: the CLI on the test's clock, the emulator over HTTP."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import signal
import subprocess
import sys
from collections import Counter

import pytest
from support import reference as plain_reference
from support.cli import REPO, assert_one_line_error, run_cli
from support.runs import (
    ERROR_KEYS,
    KEY,
    ROW_KEYS,
    assert_no_duplicates,
    cancel_cli,
    env,
    http_config,
    journal,
    judge_replies,
    parse_id,
    rows_of,
    run_args,
)

from batchbench.emulator import SystemClock


def test_full_run_on_the_public_split(batch_emulator_factory, tmp_path, dataset_dir, dataset):
    emu = batch_emulator_factory(latency=0.15)
    proc = run_cli(*run_args(emu, tmp_path, dataset_dir), env=env())
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "overall (macro)" in proc.stdout
    run_dir = tmp_path / "jobs" / "ans-model"
    rows = rows_of(run_dir / "results.jsonl")
    assert sorted(r["case_id"] for r in rows) == sorted(c["case_id"] for c in dataset.cases)
    by_id = dataset.by_id()
    replies = judge_replies(run_dir)
    for row in rows:
        assert list(row) == ROW_KEYS
        case = by_id[row["case_id"]]
        assert row["answer_temperature"] == 1 and row["judge_temperature"] == 0
        assert row["answer"].startswith("Simulated answer (ans-model): ")
        # The decisions are the ones the emulator returned, in rubric order...
        assert [d["item_id"] for d in row["decisions"]] == [
            it["item_id"] for it in case["rubric_items"]
        ]
        returned = replies[row["case_id"]]
        assert {d["item_id"]: d["matched"] for d in row["decisions"]} == returned
        for d in row["decisions"]:  # ...which follow the emulator's documented rule
            digit = hashlib.md5(f"{d['item_id']}|{row['answer']}".encode()).hexdigest()[0]
            assert d["matched"] == (digit < "8")
        # ...and the score is an independent implementation's score of them.
        matched = {i for i, m in returned.items() if m}
        score, components = plain_reference.score_case(case, matched)
        assert row["score"] == score
        assert json.dumps(row["score_components"]) == json.dumps(components)
    # The summary is byte-identical to `batchbench summarize` of the same file.
    written = (run_dir / "results.summary.json").read_bytes()
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes((run_dir / "results.jsonl").read_bytes())
    proc = run_cli("summarize", str(copy), "--dataset", str(dataset_dir))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "copy.summary.json").read_bytes() == written
    # Sharding honoured the cap: the answers in files of at most 40 lines.
    ledger = emu.ledger()
    answer_batches = [
        b for b in ledger["batches"] if b["metadata"]["batchbench_stage"] == "answers"
    ]
    assert len(answer_batches) == math.ceil(len(dataset.cases) / 40)
    for b in ledger["batches"]:
        assert b["metadata"]["batchbench_run"] == "ans-model"
        assert set(b["metadata"]) >= {"batchbench_stage", "batchbench_shard", "batchbench_attempt"}
    assert len(ledger["executions"]) == 2 * len(dataset.cases)
    assert_no_duplicates(emu)
    # Judges started per answer file, before the last answer file was collected.
    events = journal(run_dir)
    first_judge_plan = next(
        i for i, e in enumerate(events) if e["ev"] == "plan" and e["stage"] == "judges"
    )
    last_answer_collect = max(
        i for i, e in enumerate(events) if e["ev"] == "collected" and e["sub"].startswith("answers")
    )
    assert first_judge_plan < last_answer_collect
    assert os.stat(run_dir).st_mode & 0o077 == 0


RESPONDER = """
import json, re

seen = {}

def reply(body):
    user = body["messages"][-1]["content"]
    judge = body["model"] == "judge-model"
    key = ("j" if judge else "a") + user[:200]
    seen[key] = seen.get(key, 0) + 1
    n = seen[key]
    digest = sum(map(ord, user)) % 10
    if judge:
        if "temperature" in body:
            return {"status_code": 400, "body": {"error": {
                "message": "Unsupported value: 'temperature' does not support 0 with this model.",
                "type": "invalid_request_error", "param": "temperature",
                "code": "unsupported_value"}}}
        ids = re.findall(r"^\\[([^\\]]+)\\] points=", user, re.M)
        if digest == 3 and n == 1:
            return "this is not json"
        if digest == 4:
            return json.dumps({"decisions": [{"item_id": i, "matched": "true"} for i in ids]})
        return json.dumps({"decisions": [{"item_id": i, "matched": k % 2 == 0}
                                         for k, i in enumerate(ids)]})
    if digest == 1 and n == 1:
        return {"status_code": 500, "body": {"error": {"message": "overloaded"}}}
    if digest == 2 and n == 1:
        return {"error": {"code": "request_timeout", "message": "timed out"}}
    if digest == 5:
        return ""
    return "An answer."
"""


def _load_responder(tmp_path):
    from batchbench.emulator import load_responder

    path = tmp_path / "responder.py"
    path.write_text(RESPONDER)
    return load_responder(f"{path}:reply")


def test_retries_temperature_and_invalid_judges(
    batch_emulator_factory, tmp_path, fixture_dir, fixture_dataset
):
    emu = batch_emulator_factory(latency=0.1, responder=_load_responder(tmp_path))
    proc = run_cli(
        *run_args(
            emu,
            tmp_path,
            fixture_dir,
            "--benchmark",
            "drug_safety",
            "--benchmark",
            "safety_therapeutic",
            cap=15,
        ),
        env=env(),
    )
    assert proc.returncode == 1, proc.stderr  # some cases end in errors, by design
    run_dir = tmp_path / "jobs" / "ans-model"
    rows = rows_of(run_dir / "results.jsonl")
    selected = [
        c for c in fixture_dataset.cases if c["benchmark"] in ("drug_safety", "safety_therapeutic")
    ]
    assert len(rows) == len(selected) == len({r["case_id"] for r in rows})
    ok = [r for r in rows if "score" in r]
    errors = [r for r in rows if "error" in r]
    empty = "RuntimeError: API request failed after 6 attempts: API returned an empty message"
    bad_flag = "ValueError: each judge decision needs string item_id and bool matched"
    assert len(ok) > len(rows) // 2 and any(r["error"] == empty for r in errors)
    assert any(r["error"] == bad_flag for r in errors)
    for r in ok:
        assert r["judge_temperature"] is None and r["answer_temperature"] == 1
    for r in errors:
        assert list(r) == ERROR_KEYS
        assert r["error"] in (empty, bad_flag)
    ledger = emu.ledger()
    ids = [(parse_id(e["custom_id"]), e) for e in ledger["executions"]]
    runs = Counter(r.case_id for r, _ in ids if r.stage == "answers")
    statuses = {}
    for r, e in ids:
        statuses.setdefault(r.case_id + r.stage[0], []).append(e["status_code"])
    # Only the lines that failed were sent again; an empty answer, every time.
    always_empty = {r["case_id"] for r in errors if r["error"] == empty}
    for case_id, n in runs.items():
        first = statuses[case_id + "a"][0]
        want = 6 if case_id in always_empty else (1 if first == 200 else 2)
        assert n == want, (case_id, statuses[case_id + "a"])
    assert any(n == 2 for n in runs.values())
    judged_again = [e for r, e in ids if r.stage == "judges" and r.attempt >= 2]
    assert judged_again  # temperature rejections and invalid replies were judged again
    assert max(Counter(e["custom_id"] for e in ledger["executions"]).values()) == 1
    # An invalid reply is judged at most --max-attempts times (3) after the temperature retry.
    judge_runs = Counter(r.case_id for r, _ in ids if r.stage == "judges")
    assert max(judge_runs.values()) <= 4


def test_no_wait_status_and_resume(
    batch_emulator_factory, clock, tmp_path, fixture_dir, fixture_dataset
):
    smoke = len(fixture_dataset.benchmarks)  # one case per benchmark
    emu = batch_emulator_factory(latency=0.5)
    args = run_args(emu, tmp_path, fixture_dir, "--smoke", "--no-wait", cap=4)
    proc = run_cli(*args, env=env())
    assert proc.returncode == 3, proc.stderr
    status = run_cli("status", "ans-model", "--jobs-dir", str(tmp_path / "jobs"), "--json")
    data = json.loads(status.stdout)
    assert data["status"] == "in progress" and data["cases"]["total"] == smoke
    assert len(data["batches"]) == math.ceil(smoke / 4)  # answers only, 4 to a file
    listing = run_cli("list", "--jobs-dir", str(tmp_path / "jobs"))
    assert re.search(r"^ans-model\s+\S+ \S+\s+in progress\s", listing.stdout, re.M)
    ticks = 0
    while proc.returncode == 3 and ticks < 20:  # cron: a tick, some time, another tick
        clock.advance(0.2)
        proc = run_cli(*args, env=env())
        ticks += 1
    assert proc.returncode == 0 and ticks > 1, proc.stderr
    data = json.loads(run_cli("status", "--jobs-dir", str(tmp_path / "jobs"), "--json").stdout)
    assert data[0]["status"] == "complete" and data[0]["cases"]["scored"] == smoke
    assert_no_duplicates(emu)


def test_conflicting_resume_and_bad_names(batch_emulator_factory, tmp_path, fixture_dir):
    emu = batch_emulator_factory(latency=0.05)
    proc = run_cli(*run_args(emu, tmp_path, fixture_dir, "--smoke"), env=env())
    assert proc.returncode == 0, proc.stderr
    before = (tmp_path / "jobs" / "ans-model" / "journal.jsonl").read_bytes()
    args = run_args(emu, tmp_path, fixture_dir, "--smoke")
    args[args.index("judge-model")] = "other-judge"
    proc = run_cli(*args, env=env())
    assert_one_line_error(proc, "judge_model", "other-judge")
    proc = run_cli(*run_args(emu, tmp_path, fixture_dir, "--limit", "3"), env=env())
    assert_one_line_error(proc, "selection")
    assert (tmp_path / "jobs" / "ans-model" / "journal.jsonl").read_bytes() == before
    proc = run_cli(*run_args(emu, tmp_path, fixture_dir, "--run", "../x"), env=env())
    assert_one_line_error(proc, "'../x'", "[A-Za-z0-9._-]+")
    assert not (tmp_path / "x").exists()


def test_a_run_too_large_to_summarise_is_refused_before_anything_is_paid(
    batch_emulator, tmp_path, fixture_dir, monkeypatch
):
    """#52.4: a run whose summary's bootstrap would be refused (10,000 resamples of more
    cases than it draws) was bought in full and then refused its summary (100,000 cases
    did so): it is refused before the first request, naming the numbers."""
    from batchbench.scores import summary

    monkeypatch.setattr(summary, "MAX_PICKS", 10_000 * 5)  # five cases' worth
    proc = run_cli(*run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "6"), env=env())
    assert_one_line_error(proc, "with 6 cases", "are drawn here")
    assert batch_emulator.ledger()["batches"] == [] and batch_emulator.calls("openai") == {}
    proc = run_cli(*run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "5"), env=env())
    assert proc.returncode == 0, proc.stderr


def test_cancel_then_resume(batch_emulator_factory, tmp_path, fixture_dir):
    emu = batch_emulator_factory(latency=2.0)
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "30", "--no-wait", cap=10)
    assert run_cli(*args, env=env()).returncode == 3
    proc = cancel_cli(emu, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "cancelled 3 batch(es)" in proc.stdout
    status = json.loads(
        run_cli("status", "ans-model", "--jobs-dir", str(tmp_path / "jobs"), "--json").stdout
    )
    assert status["status"] == "cancelled"
    http_config(emu, latency=0.05)
    args.remove("--no-wait")
    proc = run_cli(*args, env=env())  # a plain run leaves a cancelled run as it is (#47.2)
    assert proc.returncode == 3, proc.stderr
    assert "was cancelled: collecting what finished, submitting nothing" in proc.stdout
    assert "--resume-cancelled" in proc.stdout
    proc = run_cli(*args, "--resume-cancelled", env=env())
    assert proc.returncode == 0, proc.stderr
    assert "taking 'ans-model' up again after its cancel" in proc.stdout
    rows = rows_of(tmp_path / "jobs" / "ans-model" / "results.jsonl")
    assert len(rows) == 30 and all("score" in r for r in rows)
    assert_no_duplicates(emu)


def test_missing_key_is_a_clear_error(tmp_path, fixture_dir):
    proc = run_cli(
        "run",
        "--answer-model",
        "a",
        "--judge-model",
        "j",
        "--jobs-dir",
        str(tmp_path / "jobs"),
        "--dataset",
        str(fixture_dir),
        "--smoke",
        env={"OPENAI_API_KEY": "", "OPENAI_ACCESS_TOKEN": ""},
    )
    assert_one_line_error(proc, "OPENAI_API_KEY")
    assert not (tmp_path / "jobs").exists()


def test_demo_runs_the_sample():
    proc = run_cli("demo")
    assert proc.returncode == 0, proc.stderr
    assert "overall (macro)" in proc.stdout and "completed 12  errors 0" in proc.stdout


@pytest.mark.parametrize("variable", ["OPENAI_API_KEY", "OPENAI_ACCESS_TOKEN"])
def test_key_variables(batch_emulator_factory, tmp_path, fixture_dir, variable):
    emu = batch_emulator_factory(latency=0.05, api_key=KEY)
    proc = run_cli(
        *run_args(emu, tmp_path, fixture_dir, "--limit", "2"),
        env={"OPENAI_API_KEY": "", "OPENAI_ACCESS_TOKEN": "", variable: KEY},
    )
    assert proc.returncode == 0, proc.stderr


def test_ctrl_c_is_a_clean_exit(batch_emulator_factory, tmp_path, fixture_dir):
    """A real process and a real SIGINT, landing at the worst moment: its first batch
    made, not yet journaled (the process stops itself there, the interrupt is sent
    while it is stopped). It exits cleanly, and the batch is found again on resume
    (test_pay_once covers the finding)."""
    emu = batch_emulator_factory(latency=30, clock=SystemClock())
    proc = subprocess.Popen(
        [sys.executable, "-m", "batchbench", *run_args(emu, tmp_path, fixture_dir, "--smoke")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env(), "BATCHBENCH_FAILPOINT": "created:1:stop"},
        cwd=REPO,
    )
    _, status = os.waitpid(proc.pid, os.WUNTRACED)  # until it has stopped itself
    assert os.WIFSTOPPED(status)
    assert '"create_started"' in (tmp_path / "jobs" / "ans-model" / "journal.jsonl").read_text()
    assert len(emu.ledger()["batches"]) == 1
    proc.send_signal(signal.SIGINT)
    os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "Traceback" not in err and "run the same command to resume" in err


def test_delete_remote_files_once_collected(
    batch_emulator_factory, tmp_path, fixture_dir, fixture_dataset
):
    n_files = math.ceil(len(fixture_dataset.benchmarks) / 4)  # request files a stage
    emu = batch_emulator_factory(latency=0.05)
    proc = run_cli(
        *run_args(emu, tmp_path, fixture_dir, "--smoke", cap=4), "--delete-remote-files", env=env()
    )
    assert proc.returncode == 0, proc.stderr
    assert emu.face("openai").book.files == {}  # inputs, outputs, error files: all gone
    raw = list((tmp_path / "jobs" / "ans-model" / "raw").iterdir())
    assert len(raw) == 2 * n_files  # the run folder keeps every output file
    copy = tmp_path / "again"
    proc = run_cli(*run_args(emu, copy, fixture_dir, "--smoke", cap=4), env=env())
    kept = emu.face("openai").book.files
    assert proc.returncode == 0 and len(kept) == 4 * n_files  # kept without the flag


def test_run_needs_a_dataset_and_never_falls_back_to_the_sample(tmp_path, fixture_dir):
    base = ["run", "--answer-model", "a", "--judge-model", "j", "--jobs-dir", str(tmp_path / "j")]
    proc = run_cli(*base, env={"OPENAI_API_KEY": KEY, "BATCHBENCH_DATASET": ""})
    assert_one_line_error(proc, "--dataset", "BATCHBENCH_DATASET")
    assert not (tmp_path / "j").exists()
    # The variable stands for the option (a dry run: no key, no call, nothing written).
    proc = run_cli(*base, "--dry-run", "--json", env={"BATCHBENCH_DATASET": str(fixture_dir)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["stages"]["answers"]["requests"] == len(
        list(fixture_dir.glob("data/*/cases/*.json"))
    )
    assert not (tmp_path / "j").exists()


def test_a_finished_runs_tick_asks_no_service(batch_emulator_factory, tmp_path, fixture_dir):
    """#45.11: a cron tick of a finished run, with the service down, exited 5: it says the
    run is complete, and exits 0, without a call."""
    emu = batch_emulator_factory()
    argv = run_args(emu, tmp_path, fixture_dir, "--limit", "4")
    assert run_cli(*argv, env=env()).returncode == 0
    emu.stop()  # the service is down
    proc = run_cli(*argv, "--no-wait", env=env())
    assert proc.returncode == 0, proc.stderr
    assert "run 'ans-model' is complete: 4 scored, 0 failed" in " ".join(proc.stdout.split())
    # #61.10: a complete run whose summary is gone (a tick killed just after its last
    # line, a file deleted) gets it back from any tick, the service still down
    summary = tmp_path / "jobs" / "ans-model" / "results.summary.json"
    written = summary.read_bytes()
    summary.unlink()
    again = run_cli(*argv, "--no-wait", env=env())
    assert again.returncode == 0, again.stderr
    assert summary.read_bytes() == written
    assert run_cli("report", "ans-model", "--jobs-dir", str(tmp_path / "jobs")).returncode == 0
    # #61.11: a plain run of it too (the service still down) shows its summary, exit 0
    plain = run_cli(*argv, env=env())
    assert plain.returncode == 0, plain.stderr
    assert "overall (macro)" in plain.stdout and "error" not in plain.stderr
    assert summary.read_bytes() == written


def test_a_finished_groups_plain_run_asks_no_service(batch_emulator_factory, tmp_path, fixture_dir):
    """#61.11: a finished group's command run again with the service down exited 5 (its
    model look-up); it shows each run's summary and the leaderboard, exit 0. (A failed
    case is still a plain run's to redo: test_reference_edges.)"""
    emu = batch_emulator_factory()
    argv = run_args(emu, tmp_path, fixture_dir, "--limit", "4")
    del argv[argv.index("--run") : argv.index("--run") + 2]
    at = argv.index("--answer-model")
    argv[at : at + 2] = ["--answer-model", "ans-model", "--answer-model", "gpt-5.4-mini"]
    first = run_cli(*argv, env=env())
    assert first.returncode == 0, first.stderr
    emu.stop()
    again = run_cli(*argv, env=env())
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("overall (macro)") == 2 and "leaderboard" in again.stdout
    assert again.stdout.split("leaderboard")[1] == first.stdout.split("leaderboard")[1]

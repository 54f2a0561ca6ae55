"""#62.5: a canary before the first real run on a service — a few cases bought first and
read through to rows, the rest only then; a canary that fails stops the run in one line
before the bulk is paid; its cases count (none bought twice); the jobs folder remembers
a service that passed. Proved through the CLI against the emulator (a canary is asked
for there with --canary: a loopback service is a rehearsal, where it is off by default),
by the run's journal and the emulator's ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import run_cli
from support.runs import assert_no_duplicates, env, journal, rows_of, run_args

from batchbench._failpoints import Crash

CANARY = 3  # batchbench.engine.canary.CASES, as the issue asks: "a few cases"


def _answer_plans(run_dir: Path) -> list[tuple[int, int]]:
    """(journal position, cases) of each answers file planned, and where the first answers
    file was collected."""
    events = journal(run_dir)
    return [
        (i, len(e["lines"]))
        for i, e in enumerate(events)
        if e["ev"] == "plan" and e["stage"] == "answers"
    ]


def _collected(run_dir: Path, sub: str) -> int:
    return next(
        i for i, e in enumerate(journal(run_dir)) if e["ev"] == "collected" and e["sub"] == sub
    )


def test_a_canary_goes_first_and_its_cases_count(batch_emulator, fixture_dir, tmp_path):
    proc = run_cli(*run_args(batch_emulator, tmp_path, fixture_dir, "--canary", cap=100), env=env())
    assert proc.returncode == 0, proc.stderr
    run_dir = tmp_path / "jobs" / "ans-model"
    cases = len(rows_of(run_dir / "results.jsonl"))
    plans = _answer_plans(run_dir)
    first = journal(run_dir)[plans[0][0]]["sub"]
    assert plans[0][1] == CANARY and sum(n for _, n in plans) == cases
    assert plans[1][0] > _collected(run_dir, first)  # the rest planned once it was read
    assert "canary: 3 answers" in proc.stderr and "canary passed: answers" in proc.stderr
    assert "canary passed: judges" in proc.stderr
    assert_no_duplicates(batch_emulator)  # every case bought once, the canary's included
    asked = [e["custom_id"] for e in batch_emulator.ledger()["executions"]]
    assert len(asked) == 2 * cases  # an answer and a judge per case, no more
    remembered = json.loads((tmp_path / "jobs" / ".canaries.json").read_text())
    assert len(remembered) == 2 and all("ans-model" in k or "judge-model" in k for k in remembered)
    # The jobs folder has seen this service pass: the next run goes straight to work.
    again = run_args(batch_emulator, tmp_path, fixture_dir, "--canary", cap=100)
    again[again.index("--run") + 1] = "second"
    proc = run_cli(*again, env=env())
    assert proc.returncode == 0, proc.stderr
    assert "canary" not in proc.stderr
    assert _answer_plans(tmp_path / "jobs" / "second")[0][1] == cases


def test_a_failed_canary_stops_before_the_bulk_is_paid(
    batch_emulator_factory, fixture_dir, tmp_path
):
    said = "The model `ans-model` is not available to this organization's batch tier"
    emu = batch_emulator_factory(
        responder=lambda body: {"status_code": 403, "body": {"error": {"message": said}}}
    )
    proc = run_cli(*run_args(emu, tmp_path, fixture_dir, "--canary"), env=env())
    assert proc.returncode == 5
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error")]
    assert len(lines) == 1 and "canary" in lines[0] and said in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    batches = emu.ledger()["batches"]
    assert len(batches) == 1 and len(batches[0]["custom_ids"]) == CANARY  # nothing more
    assert not (tmp_path / "jobs" / ".canaries.json").exists()
    # Run again: a new canary (the failed cases retried), still nothing of the bulk.
    proc = run_cli(*run_args(emu, tmp_path, fixture_dir, "--canary"), env=env())
    assert proc.returncode == 5
    assert [len(b["custom_ids"]) for b in emu.ledger()["batches"]] == [CANARY, CANARY]


def test_no_canary_against_a_loopback_service_unless_asked(batch_emulator, fixture_dir, tmp_path):
    proc = run_cli(*run_args(batch_emulator, tmp_path, fixture_dir, cap=100), env=env())
    assert proc.returncode == 0, proc.stderr
    run_dir = tmp_path / "jobs" / "ans-model"
    assert "canary" not in proc.stderr
    assert _answer_plans(run_dir)[0][1] == len(rows_of(run_dir / "results.jsonl"))
    assert not (tmp_path / "jobs" / ".canaries.json").exists()


def test_a_run_killed_as_its_canary_is_created_buys_it_once(
    batch_emulator, fixture_dir, tmp_path, monkeypatch
):
    """Killed the moment the canary's batch is created (billable, its id not journaled):
    the run again finds it on the service by its mark and buys nothing twice."""
    args = run_args(batch_emulator, tmp_path, fixture_dir, "--canary", cap=100)
    monkeypatch.setenv("BATCHBENCH_FAILPOINT", "created:1:raise")
    with pytest.raises(Crash):
        run_cli(*args, env=env())
    monkeypatch.delenv("BATCHBENCH_FAILPOINT")
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stderr
    assert_no_duplicates(batch_emulator)
    first = batch_emulator.ledger()["batches"][0]
    assert len(first["custom_ids"]) == CANARY


def test_a_teams_bucket_remembers_the_canary_that_passed(batch_emulator, fixture_dir, tmp_path):
    """A jobs folder in a bucket keeps the record in the bucket (a command's working
    folder goes with it): a second run there, from a fresh command, sends no canary."""
    uri = f"file://{tmp_path}/bucket"
    args = run_args(batch_emulator, tmp_path, fixture_dir, "--canary", "--limit", "8", cap=100)
    args[args.index("--jobs-dir") + 1] = uri
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stderr
    assert "canary: 3 answers" in proc.stderr
    assert (tmp_path / "bucket" / ".canaries.json").is_file()
    args[args.index("--run") + 1] = "second"
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stderr
    assert "canary" not in proc.stderr
    assert_no_duplicates(batch_emulator)

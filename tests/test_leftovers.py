"""Leftovers with a way out (#47.8): cancelling a run that has finished is one line,
and `remove` deletes a run — never one whose batches still run on the service unwatched,
never one another process is advancing, and never leaving half a run behind."""

from __future__ import annotations

import json
import shutil

import pytest
from support.cli import assert_one_line_error, run_cli
from support.runs import env, run_args

from batchbench.engine.rundir import Run


def jobs_of(tmp_path):
    return tmp_path / "jobs"


def _listed(tmp_path) -> list[str]:
    listing = run_cli("list", "--jobs-dir", str(jobs_of(tmp_path)), "--json").stdout
    return [r["run"] for r in json.loads(listing)]


def test_cancelling_a_finished_run_is_one_line_and_records_nothing(
    batch_emulator, tmp_path, fixture_dir
):
    assert (
        run_cli(
            *run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "3"), env=env()
        ).returncode
        == 0
    )
    journal = jobs_of(tmp_path) / "ans-model" / "journal.jsonl"
    before = journal.read_bytes()
    proc = run_cli("cancel", "ans-model", "--jobs-dir", str(jobs_of(tmp_path)), env=env())
    assert_one_line_error(
        proc, "run 'ans-model' has finished (3 of 3 cases scored)", "nothing to cancel"
    )
    assert journal.read_bytes() == before


def test_remove_deletes_a_finished_run_and_refuses_one_still_running(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(latency=50.0)
    jobs = ["--jobs-dir", str(jobs_of(tmp_path))]
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "4", "--no-wait", cap=2)
    assert run_cli(*args, env=env()).returncode == 3  # two batches in flight
    running = [b["id"] for b in emu.ledger()["batches"]]
    assert len(running) == 2
    proc = run_cli("remove", "ans-model", *jobs)
    assert_one_line_error(proc, "2 batch(es) in flight", *running, "batchbench cancel ans-model")
    assert _listed(tmp_path) == ["ans-model"]

    # told to stop, its batches end on their own: it may go
    assert run_cli("cancel", "ans-model", *jobs, env=env()).returncode == 0
    proc = run_cli("remove", "ans-model", *jobs)
    assert proc.returncode == 0, proc.stderr
    assert "removed run 'ans-model' (0 of 4 cases scored)" in proc.stdout
    assert not (jobs_of(tmp_path) / "ans-model").exists() and _listed(tmp_path) == []
    assert list(jobs_of(tmp_path).iterdir()) == []  # nothing left aside either
    assert_one_line_error(run_cli("remove", "ans-model", *jobs), "no run 'ans-model'")


def test_remove_force_forgets_batches_in_flight(batch_emulator_factory, tmp_path, fixture_dir):
    emu = batch_emulator_factory(latency=50.0)
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "2", "--no-wait")
    assert run_cli(*args, env=env()).returncode == 3
    proc = run_cli("remove", "ans-model", "--force", "--jobs-dir", str(jobs_of(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    assert "1 batch(es) in flight forgotten" in proc.stdout
    assert _listed(tmp_path) == []


def test_remove_refuses_a_run_another_process_advances(batch_emulator, tmp_path, fixture_dir):
    assert (
        run_cli(
            *run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "2"), env=env()
        ).returncode
        == 0
    )
    with Run(jobs_of(tmp_path) / "ans-model").lock():
        proc = run_cli("remove", "ans-model", "--jobs-dir", str(jobs_of(tmp_path)))
    assert_one_line_error(proc, "being advanced by another process")
    assert _listed(tmp_path) == ["ans-model"]


def test_a_removal_cut_short_leaves_no_half_run(batch_emulator, tmp_path, fixture_dir, monkeypatch):
    """A crash between the rename and the delete leaves the folder aside: `list` does not
    show it, and a new run of the same name starts afresh."""
    args = run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "2")
    assert run_cli(*args, env=env()).returncode == 0

    def crash(path, *a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "rmtree", crash)
    proc = run_cli("remove", "ans-model", "--jobs-dir", str(jobs_of(tmp_path)))
    assert proc.returncode == 130
    monkeypatch.undo()
    assert _listed(tmp_path) == []
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0 and "NEW run 'ans-model'" in proc.stdout


@pytest.mark.parametrize("name", ["../outside", "a/b", ".removing-x"])
def test_remove_refuses_names_that_are_not_runs(tmp_path, name):
    (tmp_path / "jobs").mkdir()
    proc = run_cli("remove", name, "--jobs-dir", str(tmp_path / "jobs"))
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1


def test_what_a_cancelled_batch_ran_is_shown_and_said_when_removed(
    batch_emulator_factory, tmp_path, fixture_dir, clock
):
    """#61.10: a cancelled batch whose output held the lines it ran (billed) showed `0/40
    lines done` once OpenAI's counts reset, and `remove` deleted it without a word. The
    lines the service said had run are kept as the batch's own: status shows them, and
    remove says they were billed and never collected — as many as the ledger executed."""
    emu = batch_emulator_factory(latency=100.0)
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "40", cap=40)
    assert run_cli(*args, "--no-wait", env=env()).returncode == 3
    clock.advance(130)  # validated at 100 s; some of its lines have run
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    assert run_cli("status", "ans-model", *jobs, "--refresh", env=env()).returncode == 0
    assert run_cli("cancel", "ans-model", *jobs, env=env()).returncode == 0
    clock.advance(700)  # ended cancelled: its counts now read 0
    refresh = run_cli("status", "ans-model", *jobs, "--refresh", env=env())
    [batch] = emu.ledger()["batches"]
    ran = sum(1 for e in emu.ledger()["executions"] if e["batch_id"] == batch["id"])
    assert batch["status"] == "cancelled" and 0 < ran < 40
    status = run_cli("status", "ans-model", *jobs).stdout
    assert f"{ran} of its 40 lines ran (billed)" in status, refresh.stdout + status
    removed = run_cli("remove", "ans-model", *jobs)
    assert removed.returncode == 0, removed.stderr
    assert f"{ran} line(s) its batches ran, billed, were never collected" in removed.stdout

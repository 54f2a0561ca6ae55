"""Requests sent one call at a time (#45.2, #45.7, #45.9): each call in the run's journal,
looked for in every folder of the run before it is bought, never sent again blind.

Proven by the emulator's record of executed requests: no request id executes twice, and
no case is paid twice in a stage (a new attempt of a case whose call's outcome is unknown
is a second payment too, unless the user asks for it with --resend-unknown).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter

import pytest
from support.cli import REPO, run_cli
from support.providers import RIGS
from support.runs import normalised, rows_of

from batchbench._failpoints import Crash
from batchbench.emulator import SystemClock

OPENAI = RIGS["openai"]
SLOW = 1000.0  # seconds a batch's lines take to run, on the emulator's clock


def _flex_run(emu, tmp_path, fixture_dir, *extra: str):
    argv = OPENAI.args(emu, tmp_path, fixture_dir, "--limit", "40", cap=40)
    return argv + ["--poll-interval", "20", "--tail-flex", "300", *extra]


def _paid(emu) -> tuple[Counter, Counter]:
    """How often each request id, and each (stage, case), executed on the service."""
    executed = emu.ledger()["executions"]
    by_id = Counter(e["custom_id"] for e in executed)
    by_case = Counter(
        (e["custom_id"].split("-")[1][0], e["custom_id"].split("-", 2)[2]) for e in executed
    )
    return by_id, by_case


def _paid_once(emu) -> None:
    by_id, by_case = _paid(emu)
    assert max(by_id.values()) == 1, by_id.most_common(2)
    assert max(by_case.values()) == 1, by_case.most_common(2)


def _crash(argv, emu, monkeypatch, point: str) -> None:
    monkeypatch.setenv("BATCHBENCH_FAILPOINT", point)
    with pytest.raises(Crash):
        run_cli(*argv, env=OPENAI.env(emu))
    monkeypatch.delenv("BATCHBENCH_FAILPOINT")


@pytest.mark.parametrize("nth", [1, 3])
@pytest.mark.parametrize("first", ["original", "copy"])
def test_a_folder_copied_while_its_tail_runs_on_flex_pays_nothing_twice(
    batch_emulator_factory, tmp_path, fixture_dir, monkeypatch, nth, first
):
    """The audit's case: a folder copied while its tail was being sent on flex (a call
    paid and not yet journaled), then both folders run to their end, either first. The
    copy never saw what the original bought after it was taken, and numbers its tail's
    submissions its own way: the calls are looked for in every folder of the run."""
    emu = batch_emulator_factory(latency=SLOW)
    emu.store.settings.flex_busy = 0.0
    argv = _flex_run(emu, tmp_path, fixture_dir)
    _crash(argv, emu, monkeypatch, f"flexed:{nth}:raise")
    jobs = tmp_path / "jobs"
    shutil.copytree(jobs / OPENAI.name(), jobs / "copy")
    runs = [argv, [*argv, "--run", "copy"]]
    for args in runs if first == "original" else runs[::-1]:
        proc = run_cli(*args, env=OPENAI.env(emu))
        assert proc.returncode == 1, proc.stderr  # the call the crash cut short: unknown
    _paid_once(emu)
    assert normalised(jobs / OPENAI.name()) == normalised(jobs / "copy")


def test_a_folder_copied_while_its_flex_tail_runs_waits_for_the_original(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """#61.11: the copy resumed *while* the original still runs its flex tail. A real
    process stops itself just after a flex call was paid, before its answer is journaled;
    the folder is copied then, and the copy is run: it is refused in one line (the run's
    token lock), buying nothing. The original goes on to its end; the copy then runs and
    adopts what the original bought. Each request executes once on the service's ledger.
    The stuck-tail anomaly holds the batch's last lines back, so the tail is cut whatever
    the machine's speed; the test waits on the stop (waitpid), on no clock."""
    emu = batch_emulator_factory(latency=0.05, clock=SystemClock())
    emu.store.settings.anomalies = {"stuck-tail": 0.05}
    emu.store.settings.flex_busy = 0.0
    argv = OPENAI.args(emu, tmp_path, fixture_dir, "--limit", "40", cap=40)
    argv += ["--poll-interval", "0.2", "--tail-flex", "0.5"]
    original = subprocess.Popen(
        [sys.executable, "-m", "batchbench", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **OPENAI.env(emu), "BATCHBENCH_FAILPOINT": "flexed:1:stop"},
        cwd=REPO,
    )
    try:
        _, status = os.waitpid(original.pid, os.WUNTRACED)  # paid, not yet journaled
        assert os.WIFSTOPPED(status)
        jobs = tmp_path / "jobs"
        shutil.copytree(jobs / OPENAI.name(), jobs / "copy")
        paid = len(emu.ledger()["executions"])
        proc = run_cli(*argv, "--run", "copy", env=OPENAI.env(emu))
        said = " ".join(proc.stderr.split())
        assert proc.returncode != 0 and "holds the same run as" in said, said
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in said
        assert len(emu.ledger()["executions"]) == paid  # the copy bought nothing
    finally:
        os.kill(original.pid, signal.SIGCONT)
        out, err = original.communicate(timeout=120)
    assert original.returncode == 0, err
    assert [e for e in emu.ledger()["executions"] if e["batch_id"] == "flex"]
    proc = run_cli(*argv, "--run", "copy", env=OPENAI.env(emu))
    assert proc.returncode == 0, proc.stderr
    _paid_once(emu)
    assert normalised(jobs / OPENAI.name()) == normalised(jobs / "copy")


def test_a_call_of_unknown_outcome_is_sent_again_only_when_asked(
    batch_emulator_factory, tmp_path, fixture_dir, monkeypatch
):
    """Crashed after a flex call was paid, before its answer was journaled: the next run
    ends its case in an error row of its own; a plain rerun (what a cron tick runs)
    leaves it and says so, every time; --resend-unknown sends it again, saying it may be
    paid twice."""
    emu = batch_emulator_factory(latency=SLOW)
    emu.store.settings.flex_busy = 0.0
    argv = _flex_run(emu, tmp_path, fixture_dir)
    _crash(argv, emu, monkeypatch, "flexed:1:raise")
    [lost] = [e["custom_id"] for e in emu.ledger()["executions"] if e["batch_id"] == "flex"]
    case = lost.split("-", 2)[2]
    proc = run_cli(*argv, env=OPENAI.env(emu))
    assert proc.returncode == 1
    said = " ".join(proc.stderr.split())
    assert f"the flex call for request {lost} was sent, but its answer never came back" in said
    rows = rows_of(tmp_path / "jobs" / OPENAI.name() / "results.jsonl")
    [error] = [r for r in rows if "error" in r]
    assert error["case_id"] == case and error["error"].startswith("OutcomeUnknown: ")
    for _ in range(2):  # each plain rerun: left as it is, said so
        proc = run_cli(*argv, env=OPENAI.env(emu))
        assert proc.returncode == 1
        said = " ".join(proc.stdout.split())
        assert "1 case(s) of 'ans-model' ended with a call sent but never answered" in said
        assert "--resend-unknown sends them again" in said
        _paid_once(emu)
    proc = run_cli(*argv, "--resend-unknown", env=OPENAI.env(emu))
    assert proc.returncode == 0, proc.stderr
    assert "as --resend-unknown asks: each may be paid twice" in " ".join(proc.stdout.split())
    by_id, by_case = _paid(emu)
    assert by_case[("a", case)] == 2 and max(by_id.values()) == 1  # asked for: once more


def test_flex_without_capacity_says_so_then_goes_back_to_batches(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """A 429 storm: each refusal said with its wait and try, the bound the README states,
    then the tail's rest goes back to the batch path; refused calls are not billed, and
    the rows are those of a run that never tried flex."""
    good = batch_emulator_factory()
    ref = OPENAI.args(good, tmp_path / "ref", fixture_dir, "--limit", "40", cap=40)
    assert run_cli(*ref, env=OPENAI.env(good)).returncode == 0
    emu = batch_emulator_factory(latency=SLOW)
    emu.store.settings.flex_busy = 1.0  # no capacity at all
    proc = run_cli(*_flex_run(emu, tmp_path, fixture_dir), env=OPENAI.env(emu))
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stderr.split())
    for k, wait in enumerate([2, 4, 8, 16, 32], 1):
        assert "flex did not take request" in said and "(429: " in said
        assert f"trying again in {wait}s, {k} of 6" in said
    assert "did not take request" in said and "in 6 tries over 62s" in said
    assert "go back to the batch path" in said
    assert not [e for e in emu.ledger()["executions"] if e["batch_id"] == "flex"]
    assert emu.ledger()["faults"]["flex-busy"] >= 6
    _paid_once(emu)
    assert normalised(tmp_path / "jobs" / OPENAI.name()) == normalised(
        tmp_path / "ref" / "jobs" / OPENAI.name()
    )


def test_a_crash_while_waiting_out_a_refusal_leaves_a_known_call(
    batch_emulator_factory, tmp_path, fixture_dir, monkeypatch
):
    """Killed in the wait after flex refused a call: the refusal was journaled (nothing
    ran), so the next run sends it, and no case ends in 'outcome unknown'."""
    emu = batch_emulator_factory(latency=SLOW)
    emu.store.settings.flex_busy, emu.store.settings.flex_busy_tries = 0.0, 1  # once each
    argv = _flex_run(emu, tmp_path, fixture_dir)
    _crash(argv, emu, monkeypatch, "busy_wait:1:raise")
    proc = run_cli(*argv, env=OPENAI.env(emu))
    assert proc.returncode == 0, proc.stderr
    assert "never came back" not in proc.stderr
    assert all(
        "error" not in r for r in rows_of(tmp_path / "jobs" / OPENAI.name() / "results.jsonl")
    )
    _paid_once(emu)


def test_an_older_batchbench_s_call_notes_are_read(
    batch_emulator_factory, tmp_path, fixture_dir, monkeypatch
):
    """A folder left by 0.3 mid-tail: its calls noted in files beside the request file
    (``<file>.flex.sent`` before a call, ``.flex.out`` after), none in the journal. A call
    noted sent and never answered is not sent again."""
    emu = batch_emulator_factory(latency=SLOW)
    emu.store.settings.flex_busy = 0.0
    argv = _flex_run(emu, tmp_path, fixture_dir)
    _crash(argv, emu, monkeypatch, "flexed:1:raise")
    run_dir = tmp_path / "jobs" / OPENAI.name()
    journal = run_dir / "journal.jsonl"
    events = [json.loads(x) for x in journal.read_text().splitlines()]
    [sent] = [e for e in events if e["ev"] == "call_sent"]
    kept = [e for e in events if not e["ev"].startswith("call")]
    journal.write_text("".join(json.dumps(e) + "\n" for e in kept))
    plan = next(e for e in events if e["ev"] == "plan" and e["sub"] == sent["sub"])
    (run_dir / "requests" / f"{plan['path']}.flex.sent").write_text(sent["rid"] + "\n")
    proc = run_cli(*argv, env=OPENAI.env(emu))
    assert proc.returncode == 1, proc.stderr
    assert f"the flex call for request {sent['rid']} was sent" in " ".join(proc.stderr.split())
    _paid_once(emu)

"""#67.3: ``run --deadline``, on the emulator's clock.

The witnesses: the emulator's ledger (what ran where, each line once), its clock (when
the last result came), the turnaround it was told to draw from, and plain arithmetic of
the conditional chance over a history written here.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from support.cli import assert_one_line_error, run_cli
from support.runs import assert_no_duplicates, env, run_args

from batchbench.engine.deadline import TARGET, parse_deadline
from batchbench.engine.turnaround import MIN_HISTORY, PRIORS, Forecast, Turnaround

HOUR = 3600.0


def test_a_deadline_is_a_time_or_a_span_from_now_and_never_past():
    now = 1_800_000_000.0
    assert parse_deadline("+14h", now) == now + 14 * HOUR
    assert parse_deadline("+90m", now) == now + 90 * 60
    assert parse_deadline("+2d", now) == now + 2 * 86400
    # 1,800,000,000 s is 2027-01-15 08:00 UTC: 09:00 with its zone named is an hour on
    assert parse_deadline("2027-01-15T09:00+00:00", now) == now + HOUR
    assert parse_deadline("2027-01-15T10:00+01:00", now) == now + HOUR


def test_a_bad_deadline_is_one_line(tmp_path, fixture_dir):
    for given, said in (("tomorrow", "a time (2026-12-08T09:00)"), ("2001-01-01T00:00", "passed")):
        argv = ["run", "--answer-model", "m", "--judge-model", "j", "--dataset", str(fixture_dir)]
        proc = run_cli(*argv, "--jobs-dir", str(tmp_path), "--deadline", given)
        assert_one_line_error(proc, said)


def _turns(seconds: list[float]) -> list[Turnaround]:
    return [Turnaround("openai", "m", 10, 0, s) for s in seconds]


def test_the_forecast_is_the_folders_own_history_once_it_has_enough():
    """With history: the share of batches older than ``elapsed`` that ended within
    ``left`` more, counted plainly; before MIN_HISTORY of them, the service's prior."""
    seconds = [600.0 * k for k in range(1, 21)]  # 10 min .. 200 min
    forecast = Forecast.of(_turns(seconds))
    elapsed, left = 3000.0, 3600.0
    older = [s for s in seconds if s > elapsed]
    expected = sum(1 for s in older if s <= elapsed + left) / len(older)
    assert forecast.chance("openai", "m", elapsed, left) == pytest.approx(expected)
    assert "history: 20 batches" in forecast.basis("openai", "m")
    few = Forecast.of(_turns(seconds[: MIN_HISTORY - 1]))
    prior = PRIORS["openai"]
    assert few.chance("openai", "m", 0.0, prior.p50) == pytest.approx(0.5)
    assert few.chance("openai", "m", 0.0, prior.p99) == pytest.approx(0.99)
    assert "prior" in few.basis("openai", "m")
    # older than every batch seen: the prior's tail answers, not a certain miss
    assert 0 < forecast.chance("openai", "m", 1e5, 12 * HOUR) < 1


def _args(emu, tmp_path, fixture_dir, *extra: str) -> list[str]:
    """A run polling every two minutes: its batches take hours of the test's clock."""
    args = run_args(emu, tmp_path, fixture_dir, *extra)
    args[args.index("--poll-interval") + 1] = "120"
    return args


def test_the_forecast_asks_the_batches_most_like_the_one_in_flight():
    """Small batches end in minutes, big ones in hours: a big batch is forecast from the
    big ones (its size band), and from the small ones only where nothing else is known."""
    small = [Turnaround("openai", "m", 10, 3, 60.0 * k) for k in range(1, 11)]
    big = [Turnaround("openai", "m", 5000, 3, HOUR * k) for k in range(1, 11)]
    forecast = Forecast.of(small + big)
    assert forecast.chance("openai", "m", 0.0, 700.0, lines=5000, hour=0) == 0.0
    assert forecast.chance("openai", "m", 0.0, 700.0, lines=10, hour=0) == 1.0
    assert "size" in forecast.basis("openai", "m", lines=5000, hour=0)
    # a size never seen: the model's whole history, 10 of 20 within 700 s
    assert forecast.chance("openai", "m", 0.0, 700.0, lines=300, hour=0) == pytest.approx(0.5)


def test_the_history_is_each_ended_batch_timed_from_its_create_to_the_poll_that_saw_it_end(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """Read back from the folder's journals: every batch that ended, as long as the
    service says it took (openai SDK: completed_at less created_at) and at most a poll
    interval more (the run learns of an end at its next poll)."""
    import openai

    from batchbench.engine.turnaround import history

    emu = batch_emulator_factory(turnaround={"openai": [600.0, 1800.0, 3600.0]})
    proc = run_cli(*_args(emu, tmp_path, fixture_dir, "--limit", "6"), env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    turns = history(tmp_path / "jobs")
    sdk = openai.OpenAI(api_key="sk-test", base_url=emu.base_url, max_retries=0)
    took = sorted(
        b.completed_at - b.created_at
        for b in (sdk.batches.retrieve(x["id"]) for x in emu.ledger()["batches"])
        if b.status == "completed"
    )
    assert len(turns) == len(took) > 0
    for seen, said in zip(sorted(t.seconds for t in turns), took):
        assert said - 1 <= seen <= said + 120 + 1
    assert {t.service for t in turns} == {"openai"}


def _ran_where(emu) -> Counter:
    return Counter(e["batch_id"] == "flex" for e in emu.ledger()["executions"])


def test_a_batch_that_cannot_end_in_time_is_finished_on_flex_by_the_deadline(
    batch_emulator_factory, tmp_path, fixture_dir, clock
):
    """OpenAI's batches here take about ten hours (p50), the deadline is three hours away:
    the forecast (the prior, no history yet) gives them under 99 %, so at its latest safe
    moment each is cancelled, what it returned kept, and the rest finished on flex — the
    run ends before the deadline, each line executed once, every line at the batch price."""
    emu = batch_emulator_factory(turnaround={"openai": [10 * HOUR, 20 * HOUR, 30 * HOUR]})
    start = clock.time()
    args = _args(emu, tmp_path, fixture_dir, "--deadline", "+3h", "--limit", "6")
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "latest safe moment" in proc.stderr
    assert clock.time() <= start + 3 * HOUR
    assert_no_duplicates(emu)
    where = _ran_where(emu)
    assert where[True] > 0  # finished on flex
    ran = Counter(e["custom_id"] for e in emu.ledger()["executions"])
    assert all(n == 1 for n in ran.values())
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    status = json.loads(run_cli("status", "ans-model", *jobs, "--json").stdout)
    # each flex reply names its tier ("the processing mode actually used"): counted
    flexed = [e for e in emu.ledger()["executions"] if e["batch_id"] == "flex"]
    said = sum(
        status["provenance"][stage]["tiers"].get("flex", 0) for stage in ("answers", "judges")
    )
    assert said == sum(1 for e in flexed if e["status_code"] == 200) > 0


def test_a_batch_likely_in_time_is_waited_for_and_nothing_goes_to_flex(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(turnaround={"openai": [60.0, 120.0, 300.0]})
    args = _args(emu, tmp_path, fixture_dir, "--deadline", "+20h", "--limit", "6")
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _ran_where(emu)[True] == 0
    assert_no_duplicates(emu)


def test_status_shows_each_batch_in_flight_against_the_deadline(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(turnaround={"openai": [10 * HOUR, 20 * HOUR, 30 * HOUR]})
    args = _args(emu, tmp_path, fixture_dir, "--deadline", "+20h", "--limit", "4")
    proc = run_cli(*args, "--no-wait", env=env())
    assert proc.returncode == 3, proc.stdout + proc.stderr
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    status = json.loads(run_cli("status", "ans-model", *jobs, "--json").stdout)
    due = status["deadline"]
    assert due["chances"] and all(0 <= c < TARGET for c in due["chances"].values())
    text = run_cli("status", "ans-model", *jobs).stdout
    assert "chance of ending by the deadline" in text and "go on flex" in text


def test_allow_list_price_goes_with_a_deadline(tmp_path, fixture_dir):
    argv = ["run", "--answer-model", "m", "--judge-model", "j", "--dataset", str(fixture_dir)]
    proc = run_cli(*argv, "--jobs-dir", str(tmp_path), "--allow-list-price")
    assert_one_line_error(proc, "--allow-list-price goes with --deadline")


def test_a_crash_between_the_cut_and_its_cancel_resumes_with_nothing_bought_twice(
    batch_emulator_factory, tmp_path, fixture_dir, monkeypatch, clock
):
    """Killed after the journal says a batch is cut short and before the service is told:
    the same command tells it, finishes the rest on flex by the deadline, each line run
    once (the emulator's ledger)."""
    from batchbench._failpoints import Crash

    emu = batch_emulator_factory(turnaround={"openai": [10 * HOUR, 20 * HOUR, 30 * HOUR]})
    start = clock.time()
    args = _args(emu, tmp_path, fixture_dir, "--deadline", "+3h", "--limit", "6")
    monkeypatch.setenv("BATCHBENCH_FAILPOINT", "cut:1:raise")
    with pytest.raises(Crash):
        run_cli(*args, env=env())
    monkeypatch.delenv("BATCHBENCH_FAILPOINT")
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert clock.time() <= start + 3 * HOUR
    assert_no_duplicates(emu)
    ran = Counter(e["custom_id"] for e in emu.ledger()["executions"])
    assert all(n == 1 for n in ran.values()) and _ran_where(emu)[True] > 0


def test_a_canary_cut_short_by_the_deadline_is_judged_by_its_calls_not_by_the_cut(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """Found by the seeded simulation (seed 539): a canary's batch cut at its latest safe
    moment came back with its lines unfinished, and the canary called that "none good",
    stopping the run. The cut lines go on flex; their answers decide the canary. (Here
    the batches are still validating when cut, so nothing of them ran; the emulator
    takes as long to cancel as to validate, so this deadline is missed: not the point.)"""
    emu = batch_emulator_factory(latency=6 * HOUR)
    args = _args(emu, tmp_path, fixture_dir, "--deadline", "+3h", "--limit", "6", "--canary")
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "canary passed" in proc.stderr and "none good" not in proc.stderr
    assert _ran_where(emu)[True] > 0  # the cut lines, on flex
    assert_no_duplicates(emu)

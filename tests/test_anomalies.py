"""batchbench under each of the real service's bad days, as the emulator plays them.

Each run must end complete and equal to a run on a good day (results and summary,
wall-clock fields aside), with no batch created twice and no line run twice.
"""

from __future__ import annotations

import pytest
from support.cli import run_cli
from support.runs import assert_no_duplicates, env, normalised, run_args

from batchbench.emulator.anomalies import ANOMALIES

CASES = ("--limit", "12")


@pytest.fixture(scope="module")
def good_day(tmp_path_factory, fixture_dir):
    from conftest import TEST_MODELS

    from batchbench.emulator import Emulator, FakeClock

    base = tmp_path_factory.mktemp("good-day")
    clock = FakeClock()
    with Emulator(latency=0.05, clock=clock, models=TEST_MODELS) as emu:
        proc = run_cli(*run_args(emu, base, fixture_dir, *CASES, cap=3), env=env(), clock=clock)
        assert proc.returncode == 0, proc.stderr
    return normalised(base / "jobs" / "ans-model")


@pytest.mark.parametrize(
    "anomaly,options,check",
    [
        ("status-zero", {"anomalies": {"status-zero": 0.3}}, "executions"),
        ("long-finalizing", {"anomalies": {"long-finalizing": 8.0}}, "finalizing"),
        ("file-not-found", {"anomalies": {"file-not-found": 1.0}}, "creates"),
        ("expired-500", {"anomalies": {"expired-500": 1.0}, "completion_window": 0.12}, "expired"),
        ("lagging-counts", {"anomalies": {"lagging-counts": 0.8}}, None),
        # the rows keep the model asked for; what served it is provenance (test_provenance)
        ("snapshot-change", {"anomalies": {"snapshot-change": 0.5}}, None),
        ("missing-lines", {"anomalies": {"missing-lines": 0.3}}, "executions"),
        # without --tail-flex a stuck tail waits for the window's end, and is sent again
        ("stuck-tail", {"anomalies": {"stuck-tail": 0.05}, "completion_window": 0.5}, "expired"),
    ],
)
def test_a_bad_day_still_ends_in_a_correct_run(
    batch_emulator_factory, tmp_path, fixture_dir, good_day, anomaly, options, check
):
    assert anomaly in ANOMALIES
    emu = batch_emulator_factory(latency=0.1, seed=4, **options)
    proc = run_cli(
        *run_args(emu, tmp_path, fixture_dir, *CASES, "--max-retries", "12", cap=3), env=env()
    )
    assert proc.returncode == 0, proc.stderr
    assert normalised(tmp_path / "jobs" / "ans-model") == good_day
    assert_no_duplicates(emu)  # no batch twice, no custom_id run twice
    ledger = emu.ledger()
    if check == "executions":  # the lines the anomaly ate were run again, the others not
        assert len(ledger["executions"]) > 2 * 12
    if check == "creates":  # every first create failed; none created a batch twice
        assert len(ledger["batches"]) == len(
            {b["metadata"]["batchbench_sub"] for b in ledger["batches"]}
        )
    if check == "expired":
        assert any(b["status"] == "expired" for b in ledger["batches"])


def test_anomalies_are_refused_when_unknown_or_out_of_range():
    for spec, message in (("bogus", "unknown anomaly 'bogus'"), ("status-zero=2", "not a rate")):
        proc = run_cli("emulator", "--anomaly", spec, real=True)
        assert proc.returncode == 2 and message in proc.stderr

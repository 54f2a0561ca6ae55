"""Results a service owes (#37.3, 5-7): a batch that says it ended but gives no results,
an empty or short file, a named file answering 404. Each is a fault the services show
for a while: waited for (said once), bounded by an hour from the first time, then one
line and exit 5 — nothing bought again — and the next run asks the service again rather
than repeating what its journal says. The emulator's ledger shows each request once.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from support.cli import assert_one_line_error, run_cli
from support.providers import RIGS
from support.runs import rows_of

from batchbench.engine.owed import RESULTS_WAIT
from batchbench.engine.rundir import Run


def _once(emu) -> None:
    counts = Counter(e["custom_id"] for e in emu.ledger()["executions"])
    assert counts and max(counts.values()) == 1, counts.most_common(3)


def _journal(folder) -> list[dict]:
    return [json.loads(x) for x in (folder / "journal.jsonl").read_text().splitlines()]


def test_a_batch_completed_without_its_files_is_waited_for_and_never_frozen(
    batch_emulator_factory, tmp_path, fixture_dir, clock
):
    """OpenAI: "completed" with no output or error file named, for longer than the wait:
    one warning, then one line and exit 5 an hour later; status says since when; the
    next run asks the service again and collects once it names them."""
    rig = RIGS["openai"]
    emu = batch_emulator_factory(latency=1000.0, anomalies={"ended-before-results": 1.0})
    # a slow batch, polled every 30 s (as a real one would be)
    args = [*rig.args(emu, tmp_path, fixture_dir, "--limit", "3", cap=3), "--poll-interval", "30"]
    start = clock.time()
    proc = run_cli(*args, env=rig.env(emu))
    assert_one_line_error(proc, "completed (its files not yet named)", "60 minutes")
    assert proc.returncode == 5
    assert proc.stderr.count("warning: batch") == 1, proc.stderr  # said once, not per poll
    assert clock.time() - start >= RESULTS_WAIT
    folder = tmp_path / "jobs" / rig.name()
    # #48.2: owed, then stopped, each its own typed event
    owed = [e for e in _journal(folder) if e["ev"] == "owed"]
    stops = [e for e in _journal(folder) if e["ev"] == "stopped"]
    assert len(owed) == 1 and len(stops) == 1 and stops[0]["reason"] == "owed"
    assert "nothing was bought again" in stops[0]["detail"]
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    status = run_cli("status", rig.name(), *jobs).stdout
    assert "stopped (results owed past the wait)" in status, status
    said = json.loads(run_cli("status", rig.name(), *jobs, "--json").stdout)
    assert [s["reason"] for s in said["stages"]["answers"]["stopped"]] == ["owed"]
    _once(emu)
    emu.store.settings.anomalies = {}  # the service names its files
    proc = run_cli(*args, env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(rows_of(folder / "results.jsonl")) == 3
    _once(emu)


def test_a_claude_batch_ended_without_results_is_said_and_bounded(
    batch_emulator_factory, tmp_path, fixture_dir
):
    rig = RIGS["anthropic"]
    emu = batch_emulator_factory(latency=1000.0, anomalies={"ended-before-results": 1.0})
    args = [*rig.args(emu, tmp_path, fixture_dir, "--limit", "3", cap=3), "--poll-interval", "30"]
    proc = run_cli(*args, env=rig.env(emu))
    assert_one_line_error(proc, "results not yet available", "nothing was bought again")
    assert proc.stderr.count("warning: batch") == 1, proc.stderr
    _once(emu)


def test_a_short_gemini_file_is_owed_not_bought_again(
    batch_emulator_factory, tmp_path, fixture_dir, monkeypatch
):
    """Gemini counts no lines: a SUCCEEDED job's file is held against the requests sent.
    An empty file, or one that lacks a line, stops the stage after the wait; nothing is
    bought again (before, 19 jobs were made for 12 cases). The kept file, unchanged
    through the hour's rechecks, is read once, not at each (sixty times)."""
    reads: list[list[str]] = []
    read_results = Run.read_results

    def counted(run, wire, refs):
        reads.append(list(refs))
        return read_results(run, wire, refs)

    monkeypatch.setattr(Run, "read_results", counted)
    rig = RIGS["gemini"]
    for anomaly in ("empty-results", "missing-lines"):
        emu = batch_emulator_factory(latency=1.0, anomalies={anomaly: 1.0})
        where = tmp_path / anomaly
        reads.clear()
        proc = run_cli(*rig.args(emu, where, fixture_dir, "--limit", "4", cap=4), env=rig.env(emu))
        assert_one_line_error(proc, "succeeded with the 4 requests it was sent", "hold")
        assert proc.returncode == 5
        assert len(emu.ledger()["batches"]) == 1
        _once(emu)
        assert len(reads) == 1, reads


def test_a_result_file_answering_404_is_one_warning_and_a_true_message(
    batch_emulator_factory, tmp_path, fixture_dir
):
    rig = RIGS["openai"]
    emu = batch_emulator_factory(latency=1.0)
    args = rig.args(emu, tmp_path, fixture_dir, "--limit", "3", cap=3)
    assert run_cli(*args, "--no-wait", env=rig.env(emu)).returncode == 3
    emu.flush()
    book = emu.face("openai").book
    outputs = [f for f in book.files.values() if f.purpose == "batch_output"]
    for f in outputs:
        del book.files[f.id]  # named by its batch, gone from the files API
    proc = run_cli(*args, env=rig.env(emu))
    assert_one_line_error(proc, "answers 404", "nothing was bought again")
    assert "vanished" not in proc.stderr
    assert proc.stderr.count("warning:") == 1, proc.stderr
    _once(emu)


@pytest.mark.parametrize("provider", ["azure", "bedrock", "anthropic", "openai"])
def test_a_service_that_makes_no_batch_is_tried_for_the_outage_window_then_stops(
    provider, batch_emulator_factory, tmp_path, fixture_dir, clock
):
    """#37.8: every create refused (overloaded, nothing made): tried again for the
    documented 10 minutes, then one line and exit 5 — not once a minute for ever."""
    rig = RIGS[provider]
    emu = batch_emulator_factory(latency=1.0)
    emu.refuse_creates(provider, 10**6, after=60.0)  # each create hangs a minute, then fails
    start = clock.time()
    args = [*rig.args(emu, tmp_path, fixture_dir, "--limit", "2", cap=2), "--poll-interval", "5"]
    proc = run_cli(*args, env=rig.env(emu))
    assert_one_line_error(proc, "has failed for", "nothing more bought")
    assert proc.returncode == 5
    assert 600 <= clock.time() - start <= 900, clock.time() - start
    assert not emu.ledger()["batches"]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_cron_ticks_share_one_outage_window_for_a_create_that_hangs(
    provider, batch_emulator_factory, tmp_path, fixture_dir, clock
):
    """#45.8: every create hangs a minute and fails, and a cron tick (--no-wait, a new
    process each time) comes every two minutes: the window runs from the first stalled
    create, not from each tick's start — once it is spent, a tick says so in one line
    with exit 5 and tries no create; a plain run, the user's own, tries again."""
    rig = RIGS[provider]
    emu = batch_emulator_factory(latency=1.0)
    emu.refuse_creates(provider, 10**6, after=60.0)
    args = [*rig.args(emu, tmp_path, fixture_dir, "--limit", "2", cap=2), "--no-wait"]
    start, codes = clock.time(), []
    for _ in range(12):  # 24 minutes of ticks
        proc = run_cli(*args, env=rig.env(emu))
        codes.append(proc.returncode)
        if proc.returncode == 5:
            assert_one_line_error(proc, "has failed for", "nothing more bought")
            break
        clock.advance(120)
    assert codes[-1] == 5, codes
    assert clock.time() - start <= 600 + 2 * 120, clock.time() - start
    tried = emu.ledger()["faults"]["refused create"]
    assert tried <= 12, tried
    again = run_cli(*args, env=rig.env(emu))  # the next tick: no create at all
    assert again.returncode == 5 and emu.ledger()["faults"]["refused create"] == tried
    assert not emu.ledger()["batches"]
    emu.hub.faults.refused_creates[provider] = 0  # the service is back
    plain = run_cli(*args[:-1], env=rig.env(emu))
    assert plain.returncode == 0, plain.stderr


def test_owed_results_are_settled_when_the_user_asks(batch_emulator_factory, tmp_path, fixture_dir):
    """#45.10: a Gemini job short of lines stops its stage after the wait; `--settle-owed`
    keeps what arrived and sends only the missing requests, once, saying first how many
    and their cost at the batch price (the arrived replies' tokens, on average, priced
    here by hand); the run then finishes, every request id paid once."""
    rig = RIGS["gemini"]
    # Every line but one left out (the bad day never leaves out all): at 0.5 some batch ids
    # left none out, and a retried call under load (a fresh id) could meet one.
    emu = batch_emulator_factory(latency=1.0, anomalies={"missing-lines": 1.0})
    args = rig.args(emu, tmp_path, fixture_dir, "--limit", "6", cap=6)
    proc = run_cli(*args, env=rig.env(emu))
    assert proc.returncode == 5, proc.stderr
    run_dir = tmp_path / "jobs" / rig.name()
    [raw] = [p for p in (run_dir / "raw").iterdir() if "batch" in p.name]
    arrived = [json.loads(x) for x in raw.read_text().splitlines()]
    assert len(arrived) == 1
    table = tmp_path / "prices.json"
    table.write_text(
        json.dumps(
            {"batch_discount": 0.5, "models": {rig.resolved: {"input": 2.0, "output": 10.0}}}
        )
    )
    usage = [a["response"]["usageMetadata"] for a in arrived]
    missing = 6 - len(arrived)
    prompt = round(sum(u["promptTokenCount"] for u in usage) / len(usage) * missing)
    out = round(sum(u["candidatesTokenCount"] for u in usage) / len(usage) * missing)
    expected = round((prompt * 2.0 + out * 10.0) / 1e6 / 2, 6)
    emu.store.settings.anomalies = {}
    proc = run_cli(*args, "--settle-owed", "--pricing", str(table), env=rig.env(emu))
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stdout.split())
    assert f"keeping the {len(arrived)} result(s) that arrived, sending the {missing}" in said
    assert "missing request(s) again once — about $" in said and "at the batch price" in said
    events = [json.loads(x) for x in (run_dir / "journal.jsonl").read_text().splitlines()]
    [settled] = [e for e in events if e["ev"] == "settled"]
    assert (settled["kept"], settled["missing"]) == (len(arrived), missing)
    assert settled["usd"] == pytest.approx(expected)
    rows = rows_of(run_dir / "results.jsonl")
    assert len(rows) == 6 and all("error" not in r for r in rows)
    _once(emu)

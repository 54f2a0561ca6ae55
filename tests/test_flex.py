"""--tail-flex: a batch's last few lines finished on OpenAI's flex tier, at the batch price.

The emulator's OpenAI face serves chat completions with ``service_tier: "flex"``:
slower, and refused 429 for want of capacity a seeded share of the time (unbilled:
nothing runs). A run told ``--tail-flex`` cancels a batch that has run that long with
a small tail left (the rule in :mod:`batchbench.engine.late`), keeps what it returned,
and sends the rest one call at a time on flex; the rows are those of a run that never
did, each request is paid once (the emulator's record of executed requests), and a
call whose outcome a crash lost is never sent blind again.
"""

from __future__ import annotations

import json
import re

import pytest
from support.cli import assert_one_line_error, run_cli
from support.providers import RIGS
from support.runs import assert_no_duplicates, normalised, rows_of

from batchbench._failpoints import Crash
from batchbench.engine.late import small_tail
from batchbench.providers.base import BatchView

OPENAI = RIGS["openai"]
SLOW = 1000.0  # seconds a batch's lines take to run, on the emulator's clock


def _flex_run(emu, tmp_path, fixture_dir, *extra: str):
    argv = OPENAI.args(emu, tmp_path, fixture_dir, "--limit", "40", cap=40)
    return argv + ["--poll-interval", "20", "--tail-flex", "300", *extra]


def _events(run_dir) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "journal.jsonl").read_text().splitlines()]


def test_the_rule_is_a_small_share_of_a_running_batch():
    """At most 5% of the lines or one line, whichever is more (at most 500), unfinished,
    while it runs and says how far it got: the rule as --help states it, by hand."""
    running = dict(id="b", status="in_progress", phase="running")
    assert small_tail(BatchView(**running, total=40, completed=38)) == 2
    assert small_tail(BatchView(**running, total=40, completed=37)) == 0  # 3 > 5% of 40
    assert small_tail(BatchView(**running, total=10, completed=9)) == 1  # one line
    assert small_tail(BatchView(**running, total=7, completed=5)) == 0  # two of seven
    assert small_tail(BatchView(**running, total=20_000, completed=19_400)) == 0  # 600 > 500
    assert small_tail(BatchView(**running, total=20_000, completed=19_500)) == 500
    assert small_tail(BatchView(**running, total=40, completed=40)) == 0  # nothing left
    assert small_tail(BatchView(**running, total=0)) == 0  # a service that says nothing
    pending = dict(running, phase="pending")
    assert small_tail(BatchView(**pending, total=40, completed=39)) == 0


def test_a_lingering_tail_finishes_on_flex_with_the_same_rows_paid_once(
    batch_emulator_factory, tmp_path, fixture_dir
):
    good = batch_emulator_factory()
    argv = OPENAI.args(good, tmp_path / "ref", fixture_dir, "--limit", "40", cap=40)
    assert run_cli(*argv, env=OPENAI.env(good)).returncode == 0
    emu = batch_emulator_factory(latency=SLOW, seed=3)
    # flex refuses each call's first try for want of capacity, and a quarter of the rest
    emu.store.settings.flex_busy, emu.store.settings.flex_busy_tries = 0.25, 1
    proc = run_cli(*_flex_run(emu, tmp_path, fixture_dir), env=OPENAI.env(emu))
    assert proc.returncode == 0, proc.stderr
    run_dir = tmp_path / "jobs" / OPENAI.name()
    assert normalised(run_dir) == normalised(tmp_path / "ref" / "jobs" / OPENAI.name())
    assert_no_duplicates(emu)
    executed = emu.ledger()["executions"]
    on_flex = [e for e in executed if e["batch_id"] == "flex"]
    tailed = [e for e in _events(run_dir) if e["ev"] == "tailed"]
    assert tailed and on_flex
    # The tail is what the batch had not finished when it was told to stop; a line it
    # still returned while stopping is kept, not sent again (CI once saw 2 of 3 on flex):
    # the flex calls are at most the tail, and no line ran twice (assert_no_duplicates).
    assert 0 < len(on_flex) <= sum(e["remaining"] for e in tailed)
    assert all(e["status_code"] == 200 for e in on_flex)
    assert emu.ledger()["faults"].get("flex-busy", 0) > 0  # 429s met, waited out, unbilled
    cancelled = {b["id"] for b in emu.ledger()["batches"] if b["status"] == "cancelled"}
    assert {e["batch_id"] for e in tailed} == cancelled
    said = " ".join(proc.stdout.split())
    # the lines planned on flex, as the journal holds them; those that ran there, the
    # ledger's (a line the stopping batch still returned is planned there only when the
    # stop came first: the two counts agree or not by that race, and each is said as is)
    planned = sum(len(e["lines"]) for e in _events(run_dir) if e["ev"] == "plan" and e.get("flex"))
    assert f"flex: {len(on_flex)} of the {planned} line(s) sent on the flex tier" in said
    # Priced at the batch price, from the tokens the flex replies say (read from the raw
    # replies here): half of $1 and $4 per million for answers, $2 and $8 for judges.
    prices = {"ans-model": (1.0, 4.0), "judge-model": (2.0, 8.0)}
    table = tmp_path / "prices.json"
    models = {m: {"input": i, "output": o} for m, (i, o) in prices.items()}
    table.write_text(json.dumps({"batch_discount": 0.5, "models": models}))
    expected = 0.0
    for out in (run_dir / "raw").glob("flex-*.jsonl"):
        for line in out.read_text().splitlines():
            body = json.loads(line)["response"]["body"]
            i, o = prices[body["model"]]
            usage = body["usage"]
            expected += (usage["prompt_tokens"] * i + usage["completion_tokens"] * o) / 2e6
    jobs = ["--jobs-dir", str(tmp_path / "jobs"), "--pricing", str(table)]
    status = json.loads(run_cli("status", OPENAI.name(), *jobs, "--json").stdout)
    # "sent" is the lines planned on flex: one the stopping batch still returned is among
    # them when the stop came first (the race above; CI saw 4 planned, 3 run on flex)
    assert status["flex"]["finished"] == len(on_flex) <= status["flex"]["sent"] == planned
    assert status["flex"]["batch_usd"] == pytest.approx(expected, abs=1e-6)  # to the micro-dollar


def test_an_azure_tail_finishes_on_azure_flex_paid_once(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """Azure OpenAI's batches count their lines as OpenAI's do, and its flex tier (a
    preview, "a 50% discount compared with Standard processing") takes the tail: through
    the v1 API's chat completions, each request once."""
    rig = RIGS["azure"]
    emu = batch_emulator_factory(latency=SLOW, seed=3)
    emu.store.settings.flex_busy = 0.0
    argv = rig.args(emu, tmp_path, fixture_dir, "--limit", "40", cap=40)
    proc = run_cli(*argv, "--poll-interval", "20", "--tail-flex", "300", env=rig.env(emu))
    assert proc.returncode == 0, proc.stderr
    assert_no_duplicates(emu)
    on_flex = [e for e in emu.ledger()["executions"] if e["batch_id"] == "flex"]
    tailed = [e for e in _events(tmp_path / "jobs" / rig.name()) if e["ev"] == "tailed"]
    assert tailed and "azure" in {e["provider"] for e in on_flex}  # answers (judges: OpenAI)
    assert 0 < len(on_flex) <= sum(e["remaining"] for e in tailed)


def test_without_the_option_nothing_goes_to_flex(batch_emulator_factory, tmp_path, fixture_dir):
    emu = batch_emulator_factory(latency=SLOW)
    argv = OPENAI.args(emu, tmp_path, fixture_dir, "--limit", "40", cap=40)
    proc = run_cli(*argv, "--poll-interval", "20", env=OPENAI.env(emu))
    assert proc.returncode == 0, proc.stderr
    assert not [e for e in emu.ledger()["executions"] if e["batch_id"] == "flex"]
    assert "flex" not in json.loads(
        run_cli("status", OPENAI.name(), "--jobs-dir", str(tmp_path / "jobs"), "--json").stdout
    )


def test_a_flex_call_whose_outcome_a_crash_lost_is_not_sent_blind_again(
    batch_emulator_factory, tmp_path, fixture_dir, monkeypatch
):
    emu = batch_emulator_factory(latency=SLOW)
    emu.store.settings.flex_busy = 0.0
    argv = _flex_run(emu, tmp_path, fixture_dir)
    monkeypatch.setenv("BATCHBENCH_FAILPOINT", "flexed:1:raise")  # paid for, not yet written
    with pytest.raises(Crash):
        run_cli(*argv, env=OPENAI.env(emu))
    monkeypatch.delenv("BATCHBENCH_FAILPOINT")
    [lost] = [e["custom_id"] for e in emu.ledger()["executions"] if e["batch_id"] == "flex"]
    proc = run_cli(*argv, env=OPENAI.env(emu))
    assert proc.returncode == 1, proc.stderr  # that case ends in an error row
    assert f"the flex call for request {lost} was sent" in " ".join(proc.stderr.split())
    flex = [e["custom_id"] for e in emu.ledger()["executions"] if e["batch_id"] == "flex"]
    assert flex.count(lost) == 1  # never sent again
    rows = rows_of(tmp_path / "jobs" / OPENAI.name() / "results.jsonl")
    errors = [r for r in rows if "error" in r]
    assert len(errors) == 1 and errors[0]["error"].startswith("OutcomeUnknown: ")
    assert "--resend-unknown" in errors[0]["error"]
    assert_no_duplicates(emu)


def test_the_run_names_services_without_a_flex_tier(batch_emulator, tmp_path, fixture_dir):
    emu = batch_emulator
    rig = RIGS["anthropic"]
    argv = rig.args(emu, tmp_path, fixture_dir, "--limit", "2", "--tail-flex", "60")
    proc = run_cli(*argv, env=rig.env(emu))
    assert proc.returncode == 0, proc.stderr
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "answers on Anthropic, no flex tail: its batches run to their end" in said
    assert "judges on OpenAI, its tail on flex" in said


def _stuck(total: int, rate: float) -> int:
    """The stuck-tail anomaly's lines as its description states them: that share of a
    batch's lines, at least one (none of a batch of one line)."""
    return 0 if total < 2 else max(1, int(total * rate + 1e-9))


def test_a_stuck_tail_is_cut_said_in_seconds_and_counted_once(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """#47.6: with the emulator's stuck-tail bad day, a batch's last lines never run; the
    run cuts them at --tail-flex, says after how long and by what rule, shows the cancel
    (no ETA while the service ends it), and counts the tail as flex, not as lost."""
    good = batch_emulator_factory()
    argv = OPENAI.args(good, tmp_path / "ref", fixture_dir, "--limit", "40", cap=40)
    assert run_cli(*argv, env=OPENAI.env(good)).returncode == 0
    emu = batch_emulator_factory(latency=SLOW, seed=3)
    emu.store.settings.anomalies = {"stuck-tail": 0.05}
    emu.store.settings.flex_busy = 0.0
    proc = run_cli(*_flex_run(emu, tmp_path, fixture_dir), env=OPENAI.env(emu))
    assert proc.returncode == 0, proc.stderr
    run_dir = tmp_path / "jobs" / OPENAI.name()
    assert normalised(run_dir) == normalised(tmp_path / "ref" / "jobs" / OPENAI.name())
    assert_no_duplicates(emu)

    said = re.findall(
        r"has run (\d+)s \(--tail-flex 300s\) with (\d+) of its (\d+) lines unfinished"
        r" \((\d+)%; the rule: 5% of its lines or one, whichever is more\): cancelled",
        " ".join(proc.stderr.split()),
    )
    tailed = [e for e in _events(run_dir) if e["ev"] == "tailed"]
    assert len(said) == len(tailed) >= 2  # the answers' batch and a judges' one
    for (ran, left, total, share), event in zip(said, tailed):
        assert int(ran) >= 300 and int(left) == event["remaining"]
        assert int(left) == _stuck(int(total), 0.05)  # exactly the lines that stuck
        assert int(share) == round(100 * int(left) / int(total))
    cancelling = [x for x in proc.stderr.splitlines() if "cancelling)" in x]
    assert cancelling and not [x for x in cancelling if "ETA" in x]

    on_flex = [e for e in emu.ledger()["executions"] if e["batch_id"] == "flex"]
    # The tail is what the batch had not finished when it was told to stop; a line it
    # still returned while stopping is kept, not sent again (CI once saw 2 of 3 on flex):
    # the flex calls are at most the tail, and no line ran twice (assert_no_duplicates).
    assert 0 < len(on_flex) <= sum(e["remaining"] for e in tailed)
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    status = json.loads(run_cli("status", OPENAI.name(), *jobs, "--json").stdout)
    assert not any(status["losses"].values())  # the tail went to flex: nothing was lost
    assert status["flex"]["sent"] == status["flex"]["finished"] == len(on_flex)
    assert "lost by the service" not in run_cli("status", OPENAI.name(), *jobs).stdout


def test_a_tail_too_large_to_cut_is_said_and_left_to_run(
    batch_emulator_factory, tmp_path, fixture_dir, clock
):
    emu = batch_emulator_factory(latency=SLOW, seed=3)
    emu.store.settings.anomalies = {"stuck-tail": 0.2}  # 8 of 40: more than 5%
    argv = [*_flex_run(emu, tmp_path, fixture_dir), "--no-wait"]
    assert run_cli(*argv, env=OPENAI.env(emu)).returncode == 3  # submitted, not done
    clock.advance(3 * SLOW)  # validated, run through all it will run, past --tail-flex
    proc = run_cli(*argv, env=OPENAI.env(emu))
    assert proc.returncode == 3, proc.stderr
    said = " ".join(proc.stderr.split())
    assert "with 8 of its 40 lines unfinished; more than the 2 the rule takes" in said
    assert [b["status"] for b in emu.ledger()["batches"]] == ["in_progress"]  # left to run
    status = run_cli("status", OPENAI.name(), "--jobs-dir", str(tmp_path / "jobs")).stdout
    assert "answers-0001 running: 32/40 lines done" in status


def test_the_demo_rehearses_a_tail_finished_on_flex(tmp_path):
    """The README's one-command rehearsal: the bundled sample, a stuck tail, --tail-flex."""
    argv = ["demo", "--anomaly", "stuck-tail", "--tail-flex", "3", "--jobs-dir", str(tmp_path)]
    proc = run_cli(*argv)
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stderr.split())
    assert said.count("(--tail-flex 3s) with 1 of its") == 2  # the answers' and judges' tail
    assert "flex: 2 of the 2 line(s) sent on the flex tier" in proc.stdout
    wrong = run_cli("demo", "--anomaly", "no-such-day", "--jobs-dir", str(tmp_path / "x"))
    assert_one_line_error(wrong, "--anomaly: unknown anomaly 'no-such-day'")


def test_the_demo_rehearses_every_venue_its_help_names(tmp_path):
    """`demo --answer-model` on each venue whose models are only listed, never looked up
    by name (OpenRouter's: the face lists the models the demo rehearses), and a group of
    them in one command."""
    argv = ["demo", "--jobs-dir", str(tmp_path), "--answer-model", "openrouter/openai/sim-x"]
    proc = run_cli(*argv, "--answer-model", "groq/sim-x")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("overall (macro)") >= 2

"""Pay once, whatever the run folder or the service does (#28): the emulator's record of
executed requests proves that no request was bought twice.

Every provider's batches carry the run's mark: a random token drawn when the run is
made (``run.json``), in every request id, and — where the service keeps one — in the
batch's tag (OpenAI metadata, a Gemini display name, a Fireworks job id). A run folder
that lost its memory is the contract of ``test_pay_once_folders.py`` (every provider of
the registry); here, the services' own faults and what cancel and status make of them.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from support.cli import assert_one_line_error, run_cli
from support.providers import RIGS
from support.runs import assert_no_duplicates, parse_id, rows_of, varied_sample

from batchbench._failpoints import Crash

ANTHROPIC = RIGS["anthropic"]


def _once(emu) -> Counter:
    """Every executed request id, counted: each must be 1."""
    counts = Counter(e["custom_id"] for e in emu.ledger()["executions"])
    assert counts and max(counts.values()) == 1, counts.most_common(3)
    return counts


def _run_dir(rig, tmp_path):
    return tmp_path / "jobs" / rig.name()


def _each_request_once(emu) -> None:
    """No case was bought twice in a stage (under any id): the run never took a batch of
    its own for lost."""
    ran: Counter[tuple[str, str, int]] = Counter()
    for e in emu.ledger()["executions"]:
        if e["custom_id"].startswith("colleague-"):
            continue
        request = parse_id(e["custom_id"])
        ran[(request.stage, request.case_id, request.judge_pass)] += 1
    assert ran and max(ran.values()) == 1, ran.most_common(3)


@pytest.mark.parametrize(
    "rig,anomaly",
    [
        (RIGS["anthropic"], "ended-before-results"),
        (RIGS["fireworks"], "ended-before-results"),
        (RIGS["anthropic"], "not-found-after-create"),
    ],
    ids=lambda x: getattr(x, "provider", x),
)
def test_the_services_known_faults_buy_nothing_again(
    rig, anomaly, batch_emulator_factory, tmp_path, fixture_dir
):
    """An Anthropic batch that says ended before its results_url is set, a Fireworks job
    COMPLETED before its output dataset exists, an Anthropic batch answering 404 right
    after its create and its end (anthropic-sdk-python#1432): waited out, never taken
    for lost."""
    emu = batch_emulator_factory(latency=2.0, anomalies={anomaly: 1.0})
    proc = run_cli(*rig.args(emu, tmp_path, fixture_dir, "--limit", "6", cap=3), env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(rows_of(_run_dir(rig, tmp_path) / "results.jsonl")) == 6
    _each_request_once(emu)


def test_a_lost_create_beside_a_colleagues_batch_adopts_only_its_own(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """A Message Batch keeps no tag. A create whose reply was lost, with a colleague's
    batch of the same size made right after: both are candidates; cancel touches neither
    (it says why); the run adopts the one whose results carry its ids and leaves the
    colleague's alone."""
    rig = ANTHROPIC
    emu = batch_emulator_factory(latency=5.0)
    emu.lose_creates("anthropic", colleague=True)
    args = rig.args(emu, tmp_path, fixture_dir, "--limit", "4", cap=4)
    proc = run_cli(*args, "--no-wait", env=rig.env(emu))
    assert proc.returncode == 3, proc.stderr
    made = [b for b in emu.ledger()["batches"] if b["provider"] == "anthropic"]
    assert len(made) == 2  # ours and the colleague's, nothing more
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    status = run_cli("status", rig.name(), *jobs).stdout
    assert all(b["id"] in status for b in made) and "unconfirmed" in status
    cancel = run_cli("cancel", rig.name(), *jobs, env=rig.env(emu))
    assert "none is cancelled" in cancel.stderr and all(b["id"] in cancel.stderr for b in made)
    statuses = {b["id"]: b["status"] for b in emu.ledger()["batches"]}
    assert all(statuses[b["id"]] != "canceling" for b in made)
    proc = run_cli(*args, "--resume-cancelled", env=rig.env(emu))  # cancelled: taken up again
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(rows_of(_run_dir(rig, tmp_path) / "results.jsonl")) == 4
    _each_request_once(emu)
    colleague = next(b for b in made if b["custom_ids"][0].startswith("colleague-"))
    assert (
        emu.ledger()["batches"][[b["id"] for b in emu.ledger()["batches"]].index(colleague["id"])][
            "status"
        ]
        == "ended"
    )  # run to its end, untouched
    events = [json.loads(x) for x in (_run_dir(rig, tmp_path) / "journal.jsonl").open()]
    assert {e["batch_id"] for e in events if e["ev"] == "disowned"} == {colleague["id"]}


@pytest.mark.parametrize("rig", list(RIGS.values()), ids=lambda r: r.provider)
def test_cancel_after_a_crash_right_after_create_finds_the_batch(
    rig, batch_emulator_factory, tmp_path, fixture_dir, monkeypatch
):
    """The process died between a create and its journal line: cancel looks the batch up
    and cancels it (a tagged service), or says it cannot tell it apart (Anthropic's and
    OpenRouter's batches keep no mark)."""
    emu = batch_emulator_factory(latency=50.0)
    args = rig.args(emu, tmp_path, fixture_dir, "--limit", "4", cap=4)
    monkeypatch.setenv("BATCHBENCH_FAILPOINT", "created:1:raise")
    with pytest.raises(Crash):
        run_cli(*args, "--no-wait", env=rig.env(emu))
    monkeypatch.delenv("BATCHBENCH_FAILPOINT")
    [batch] = [b for b in emu.ledger()["batches"] if b["provider"] == (rig.face or rig.provider)]
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    proc = run_cli("cancel", rig.name(), *jobs, env=rig.env(emu))
    assert proc.returncode == 0, proc.stderr
    [after] = [b for b in emu.ledger()["batches"] if b["id"] == batch["id"]]
    if not rig.tagged:
        assert batch["id"] in proc.stderr and "none is cancelled" in proc.stderr
        assert after["status"] != "canceling"
    else:
        assert "cancelled 1 batch" in proc.stdout, proc.stdout
        # ended as cancelled, or on its way there (Bedrock says Stopping)
        word = after["status"].lower()
        assert after["status"] == rig.ended or "cancel" in word or "stop" in word


def test_a_batch_whose_counts_and_results_disagree_stops_and_is_collected_later(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """Counts that say every line succeeded, results that hold none: the stage stops in
    one line naming the batch, its counts and what was read, buying nothing; once the
    service has its results, running again collects them."""
    rig = RIGS["openai"]
    emu = batch_emulator_factory(latency=1.0, anomalies={"empty-results": 1.0})
    args = rig.args(emu, tmp_path, fixture_dir, "--limit", "3", cap=3)
    proc = run_cli(*args, env=rig.env(emu))
    assert_one_line_error(proc, "counts saying 3 of 3 lines succeeded", "hold 0 lines")
    assert proc.returncode == 5
    _each_request_once(emu)
    emu.store.settings.anomalies = {}  # the service recovers
    proc = run_cli(*args, env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(rows_of(_run_dir(rig, tmp_path) / "results.jsonl")) == 3
    _each_request_once(emu)


def test_a_resume_under_another_account_is_refused(batch_emulator_factory, tmp_path, fixture_dir):
    rig = RIGS["fireworks"]
    emu = batch_emulator_factory(latency=50.0)
    args = rig.args(emu, tmp_path, fixture_dir, "--limit", "4", cap=4)
    assert run_cli(*args, "--no-wait", env=rig.env(emu)).returncode == 3
    made = len(emu.ledger()["batches"])
    elsewhere = {**rig.env(emu), "FIREWORKS_ACCOUNT_ID": "another"}
    proc = run_cli(*args, env=elsewhere)
    own = f"FIREWORKS_ACCOUNT_ID={rig.env(emu)['FIREWORKS_ACCOUNT_ID']}"
    assert_one_line_error(proc, own, "FIREWORKS_ACCOUNT_ID=another", "--move-service")
    assert len(emu.ledger()["batches"]) == made
    # status asks under the run's own account, and says so.
    status = run_cli(
        "status", rig.name(), "--refresh", "--jobs-dir", str(tmp_path / "jobs"), env=elsewhere
    )
    assert status.returncode == 0 and own in status.stderr


def test_gemini_replies_under_the_wrong_keys_are_refused_not_scored(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """python-genai#1909: replies filed under other lines' keys. Each reply's prompt token
    count is checked against its own request: the file is refused in one line, and no
    answer is scored against another case's rubric."""
    rig = RIGS["gemini"]
    emu = batch_emulator_factory(latency=1.0, anomalies={"wrong-keys": 1.0})
    # Prompts of different lengths (the sample's and the fixture's are nearly all alike,
    # and replies to prompts of one length cannot be told apart by their counts).
    varied = varied_sample(tmp_path)
    args = rig.args(emu, tmp_path, varied, "--limit", "12", cap=12)
    proc = run_cli(*args, env=rig.env(emu))
    assert_one_line_error(proc, "far from their own requests'", "other requests' keys")
    assert not (_run_dir(rig, tmp_path) / "results.jsonl").exists() or not rows_of(
        _run_dir(rig, tmp_path) / "results.jsonl"
    )
    _each_request_once(emu)
    # The same run on a good day is not refused (the check passes honest files).
    good = batch_emulator_factory(latency=1.0)
    proc = run_cli(
        *rig.args(good, tmp_path / "good", varied, "--limit", "12", cap=12), env=rig.env(good)
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("provider", sorted(RIGS), ids=str)
def test_a_create_that_lands_after_its_caller_gave_up_is_bought_once(
    provider, batch_emulator_factory, tmp_path, fixture_dir, clock
):
    """#61.1: the create's front door answers 504 (it gave up waiting) and the create
    reaches the service 90 s later. The look right after finds nothing; a second create
    then would buy the batch twice. The run waits for the first to land, saying so in
    one line, adopts it, and ends with each request bought once."""
    rig = RIGS[provider]
    emu = batch_emulator_factory(latency=5.0)
    emu.delay_creates(rig.face_name, after=90.0)
    args = [*rig.args(emu, tmp_path, fixture_dir, "--limit", "4", cap=4), "--poll-interval", "5"]
    proc = run_cli(*args, env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    clock.advance(600)  # whatever was still on its way has landed, and has run
    emu.flush()
    faults = emu.ledger()["faults"]
    assert faults.get("late create landed") == 1, faults
    assert_no_duplicates(emu)
    # Bedrock's clientRequestToken and Fireworks' chosen job id make a second create the
    # same job (or a 409): nothing to wait for there; elsewhere it is waited for, said once.
    said = 0 if provider in ("bedrock", "fireworks") else 1
    assert proc.stderr.count("may still reach") == said, proc.stderr
    assert len(rows_of(_run_dir(rig, tmp_path) / "results.jsonl")) == 4


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_creates_that_never_answer_are_waited_for_then_stop_in_one_line(
    provider, batch_emulator_factory, tmp_path, fixture_dir, clock
):
    """#61.1: every create times out at the front door and never lands. A cron tick right
    after one makes no second create (it is still on its way: exit 3, in progress); a
    plain run waits each create out (ten minutes), tries once more, and stops in one line
    once the outage window and that wait are spent (its own window: a plain run starts
    one afresh), nothing made."""
    rig = RIGS[provider]
    emu = batch_emulator_factory(latency=5.0)
    emu.delay_creates(rig.face_name, 10**6, after=10**9)
    args = [*rig.args(emu, tmp_path, fixture_dir, "--limit", "2", cap=2), "--poll-interval", "30"]
    tick = run_cli(*args, "--no-wait", env=rig.env(emu))
    assert tick.returncode == 3, tick.stdout + tick.stderr
    assert tick.stderr.count("may still reach") == 1, tick.stderr
    clock.advance(60)
    again = run_cli(*args, "--no-wait", env=rig.env(emu))
    assert again.returncode == 3 and "may still reach" not in again.stderr, again.stderr
    assert emu.ledger()["faults"]["late create"] == 1  # the tick looked, and made nothing
    start = clock.time()
    proc = run_cli(*args, env=rig.env(emu))
    assert_one_line_error(proc, "has failed for", "nothing more bought")
    assert proc.returncode == 5
    # the tick's create waited out; then two of the run's own, 10 + 10 minutes apart
    assert emu.ledger()["faults"]["late create"] == 3
    assert 1200 <= clock.time() - start <= 1800 + 120, clock.time() - start
    assert not emu.ledger()["batches"]


def _stopped_while_its_create_is_on_the_way(rig, factory, tmp_path, fixture_dir, monkeypatch):
    """A run whose create is held on its way in (it lands 90 s later), stopped before it
    knows (a crash at the failpoint): the emulator, and the run's arguments."""
    emu = factory(latency=5.0)
    emu.delay_creates(rig.face_name, after=90.0)
    args = [*rig.args(emu, tmp_path, fixture_dir, "--limit", "4", cap=4), "--poll-interval", "5"]
    monkeypatch.setenv("BATCHBENCH_FAILPOINT", "create_unanswered:1:raise")
    with pytest.raises(Crash):
        run_cli(*args, env=rig.env(emu))
    monkeypatch.delenv("BATCHBENCH_FAILPOINT")
    return emu, args


@pytest.mark.parametrize("provider", ["openai", "anthropic", "mistral"])
def test_a_process_stopped_while_its_create_is_on_the_way_is_resumed_without_a_second(
    provider, batch_emulator_factory, tmp_path, fixture_dir, clock, monkeypatch
):
    """#61.1 and .2: the create is held on its way in (it lands 90 s later) and the
    process stops before it knows (the journal holds the intent, no outcome). Resumed at
    once, the look finds nothing yet: the run waits for it as for a create with no answer
    (said once), finds it when it lands, and buys nothing twice. `--create-wait` bounds
    the wait: with 0 the same resume buys the batch again (what the rule prevents)."""
    rig = RIGS[provider]
    emu, args = _stopped_while_its_create_is_on_the_way(
        rig, batch_emulator_factory, tmp_path, fixture_dir, monkeypatch
    )
    proc = run_cli(*args, env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr.count("stopped before its answer") == 1, proc.stderr
    clock.advance(600)
    emu.flush()
    assert emu.ledger()["faults"].get("late create landed") == 1
    assert_no_duplicates(emu)
    assert len(rows_of(_run_dir(rig, tmp_path) / "results.jsonl")) == 4


def test_a_create_wait_of_zero_is_the_user_taking_the_risk(
    batch_emulator_factory, tmp_path, fixture_dir, clock, monkeypatch
):
    """The witness that the wait above is what holds: told not to wait (`--create-wait
    0`), the same resume creates again at once, and the late create makes a second batch
    of the same requests."""
    rig = RIGS["openai"]
    emu, args = _stopped_while_its_create_is_on_the_way(
        rig, batch_emulator_factory, tmp_path, fixture_dir, monkeypatch
    )
    assert run_cli(*args, "--create-wait", "0", env=rig.env(emu)).returncode == 0
    clock.advance(600)
    emu.flush()
    made = [b for b in emu.ledger()["batches"] if b["metadata"]["batchbench_sub"] == "answers-0001"]
    assert len(made) == 2


def test_an_openrouter_cancel_says_what_it_bills_and_the_resume_prices_what_it_buys_again(
    batch_emulator_factory, tmp_path, fixture_dir, clock
):
    """#61.3: OpenRouter returns no result rows for a cancelled batch and still bills what
    ran ("Cancel a batch", its API reference). `cancel` says so, with how many lines ran,
    before it cancels; `--resume-cancelled` says how many of them it buys again, priced.
    The ledger: exactly those lines bought twice, every other once."""
    rig = RIGS["openrouter"]
    emu = batch_emulator_factory(latency=100.0)
    args = rig.args(emu, tmp_path, fixture_dir, "--limit", "10", cap=10)
    assert run_cli(*args, "--no-wait", env=rig.env(emu)).returncode == 3
    clock.advance(125)  # validated at 100 s; some of its lines have run
    emu.tick()
    [batch] = emu.ledger()["batches"]
    ran = [e for e in emu.ledger()["executions"] if e["batch_id"] == batch["id"]]
    assert 0 < len(ran) < 10
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    cancel = run_cli("cancel", rig.name(), *jobs, env=rig.env(emu))
    assert cancel.returncode == 0, cancel.stderr
    said = [line for line in cancel.stderr.splitlines() if "no result rows" in line]
    assert len(said) == 1 and f"{len(ran)} of its 10" in said[0], cancel.stderr
    emu.flush()
    again = run_cli(*args, "--resume-cancelled", env=rig.env(emu))
    assert again.returncode == 0, again.stdout + again.stderr
    told = [line for line in (again.stdout + again.stderr).splitlines() if "bought again" in line]
    assert any(f"{len(ran)} request(s)" in line and "$" in line for line in told), told

    # the ones the cancelled batch ran, bought twice (said); every other request once
    def case(e: dict) -> tuple[str, str]:
        request = parse_id(e["custom_id"])
        return request.stage, request.case_id

    counts = Counter(case(e) for e in emu.ledger()["executions"])
    twice = {k for k, n in counts.items() if n == 2}
    assert twice == {case(e) for e in ran}
    assert max(counts.values()) == 2

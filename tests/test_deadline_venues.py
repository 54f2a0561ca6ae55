"""#67.3 on the services beside OpenAI and Bedrock: a deadline's fallback on Gemini's flex
tier (at the batch price) and on Anthropic's Messages API (at the list price, only with
``--allow-list-price``).

The witnesses: the emulator's ledger (what ran where, each line once), its clock, and
the plain bill of what it executed, priced by this file's own table.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from support.cli import run_cli
from support.providers import RIGS
from support.runs import assert_no_duplicates

HOUR = 3600.0
# p50, p90, p99: forty hours at the median, and never under four (a tenth of it: the
# emulator's draw), so every batch misses a three-hour deadline whatever its seed draws
SLOW = [40 * HOUR, 60 * HOUR, 80 * HOUR]
LIST = {"input": 3.0, "output": 15.0}  # USD per 1M tokens, this file's own


def _rig_run(batch_emulator_factory, tmp_path, fixture_dir, service: str, *extra: str):
    """Answers on ``service``, whose batches take at least four hours, judges on OpenAI;
    priced by this file's own table (list price; half of it in a batch)."""
    rig = RIGS[service]
    emu = batch_emulator_factory(models=[rig.resolved], turnaround={rig.face_name: SLOW})
    emu.store.settings.flex_busy = 0.0
    emu.store.settings.flex_busy_tries = 1  # flex sheds each call's first try: tried again
    table = tmp_path / "prices.json"
    prices = {rig.model: LIST, "judge-model": LIST}
    table.write_text(json.dumps({"batch_discount": 0.5, "models": prices}))
    args = rig.args(emu, tmp_path, fixture_dir, "--limit", "6", "--pricing", str(table), *extra)
    args[args.index("--poll-interval") + 1] = "120"
    return rig, emu, args, ["--jobs-dir", str(tmp_path / "jobs"), "--pricing", str(table)]


def _usd(executed: list[dict], share: float) -> float:
    """The plain bill of what ran: its billed tokens at ``share`` of the list price."""
    billed = [e["billed"] for e in executed]
    spent = sum(b["input"] * LIST["input"] + b["output"] * LIST["output"] for b in billed)
    return spent * share / 1e6


ALONE = ("flex", "sync", "on-demand")  # how the emulator's ledger names a single call


def _answers(emu, face: str) -> tuple[list[dict], list[dict]]:
    """What the service billed for answers: in its batches, and one call at a time
    (Bedrock's calls reach its runtime endpoint)."""
    ran = [e for e in emu.ledger()["executions"] if e["provider"] in (face, f"{face}-runtime")]
    ok = [e for e in ran if e["status_code"] == 200]
    return [e for e in ok if e["batch_id"] not in ALONE], [e for e in ok if e["batch_id"] in ALONE]


@pytest.mark.parametrize("service", ["gemini", "azure", "vertex-gemini"])
def test_a_batch_that_cannot_end_in_time_is_finished_on_its_services_flex_tier(
    batch_emulator_factory, tmp_path, fixture_dir, clock, service
):
    """The service's batches take at least four hours, the deadline is three hours away: each
    is cancelled at its latest safe moment and its unfinished requests go one call at a
    time with service_tier flex (Gemini's generateContent, Azure OpenAI's chat
    completions; on Vertex AI, Flex PayGo's headers on the global endpoint, though its
    jobs run in us-central1) — the run ends by the deadline, each request executed once,
    all of it at the batch price."""
    start = clock.time()
    rig, emu, args, jobs = _rig_run(
        batch_emulator_factory, tmp_path, fixture_dir, service, "--deadline", "+3h"
    )
    proc = run_cli(*args, env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "latest safe moment" in proc.stderr
    assert clock.time() <= start + 3 * HOUR
    assert_no_duplicates(emu)
    batched, flexed = _answers(emu, rig.face_name)
    assert flexed and all(e["batch_id"] == "flex" for e in flexed)
    assert len(batched) + len(flexed) == 6  # each answer once, here or there
    assert emu.store.faults.get("flex-busy", 0) == len(flexed)  # each shed once, then served
    status = json.loads(run_cli("status", rig.name(), *jobs, "--json").stdout)
    answers = status["cost"]["stages"]["answers"]
    assert answers["batch_usd"] == pytest.approx(_usd(batched + flexed, 0.5), abs=2e-6)
    assert not answers.get("list_price_usd")
    if service == "vertex-gemini":  # each flex reply says it was served on flex: counted
        tiers = status["provenance"]["answers"]["tiers"]
        assert tiers.get("ON_DEMAND_FLEX") == len(flexed)


@pytest.mark.parametrize("service", ["gemini", "azure", "vertex-gemini"])
def test_status_says_the_batch_goes_on_flex(batch_emulator_factory, tmp_path, fixture_dir, service):
    rig, emu, args, jobs = _rig_run(
        batch_emulator_factory, tmp_path, fixture_dir, service, "--deadline", "+20h", "--no-wait"
    )
    proc = run_cli(*args, env=rig.env(emu))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    text = run_cli("status", rig.name(), *jobs).stdout
    assert f"({service}): " in text and "go on flex, at the batch price" in text


@pytest.mark.parametrize("service", ["anthropic", "groq", "bedrock", "together", "xai"])
def test_a_batch_falls_back_to_calls_at_list_price_when_allowed(
    batch_emulator_factory, tmp_path, fixture_dir, clock, service
):
    """--allow-list-price: at its latest safe moment the batch is cancelled and its
    unfinished requests go one call at a time at the list price (Anthropic's Messages
    API; Groq's chat completions, whose flex tier costs the same; Bedrock's InvokeModel;
    Together's and xAI's chat completions, xAI's written as its results pages are);
    the answers' cost is
    the plain bill of what ran where — the batch's at half the list price, the calls'
    at the whole of it — and each request ran once."""
    start = clock.time()
    rig, emu, args, jobs = _rig_run(
        batch_emulator_factory,
        tmp_path,
        fixture_dir,
        service,
        "--deadline",
        "+3h",
        "--allow-list-price",
    )
    proc = run_cli(*args, env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "on demand, at the list price (--allow-list-price)" in proc.stderr
    assert clock.time() <= start + 3 * HOUR
    assert_no_duplicates(emu)
    batched, listed = _answers(emu, rig.face_name)
    assert listed and not [e for e in listed if e["batch_id"] == "flex"]
    assert len(batched) + len(listed) == 6
    ran = Counter(e["custom_id"] for e in emu.ledger()["executions"])
    assert all(n == 1 for n in ran.values())
    status = json.loads(run_cli("status", rig.name(), *jobs, "--json").stdout)
    answers = status["cost"]["stages"]["answers"]
    assert answers["batch_usd"] == pytest.approx(_usd(batched, 0.5) + _usd(listed, 1.0), abs=2e-6)
    assert answers["list_price_usd"] == pytest.approx(_usd(listed, 1.0), abs=2e-6)
    if service == "anthropic":  # each reply names the tier it was served on: counted
        tiers = status["provenance"]["answers"]["tiers"]
        assert tiers.get("standard") == len(listed)


@pytest.mark.parametrize("service", ["anthropic", "bedrock"])
def test_without_leave_a_batch_is_waited_for_and_status_says_how_to_allow_it(
    batch_emulator_factory, tmp_path, fixture_dir, service
):
    rig, emu, args, jobs = _rig_run(
        batch_emulator_factory, tmp_path, fixture_dir, service, "--deadline", "+3h", "--no-wait"
    )
    proc = run_cli(*args, env=rig.env(emu))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    text = run_cli("status", rig.name(), *jobs).stdout
    assert f"no fallback: {service} has no flex tier (--allow-list-price" in text
    assert not [e for e in emu.ledger()["executions"] if e["batch_id"] in ALONE]


def test_a_healthbench_answer_keeps_back_time_for_a_grader_call_per_rubric_item(
    batch_emulator_factory, tmp_path, fixture_dir, clock
):
    """The latest safe moment of an answers batch keeps back the fallback's time for its
    judges, and a HealthBench answer has one grader request per rubric item — here
    counted from the dataset file itself — not one. The written rule (docs/costs.md):
    the deadline less the time the batch's unfinished lines and its judges would take
    on the fallback (a cancel, then one call after another), with half again to spare."""
    from support import healthbench_rules as rules

    from batchbench.engine import deadline as rule
    from batchbench.engine.rundir import open_run
    from batchbench.engine.turnaround import Forecast

    examples = rules.lines()
    items = sum(len(line["rubrics"]) for line in examples)
    emu = batch_emulator_factory(turnaround={"openai": SLOW})
    args = RIGS["openai"].args(
        emu, tmp_path, fixture_dir, "--dataset", str(rules.FILE), "--deadline", "+20h"
    )
    args[args.index("--poll-interval") + 1] = "120"
    proc = run_cli(*args, "--no-wait", env=RIGS["openai"].env(emu))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    run = open_run(tmp_path / "jobs", RIGS["openai"].name())
    config = run.load_config()
    state = run.state(list(config.case_ids))
    assert state.deadline is not None
    seen = rule.outlook(state, config, state.deadline, clock.time(), Forecast({}))
    (answers,) = [o for o in seen if o.sub.stage == "answers"]
    assert len(answers.sub.lines) == len(examples)

    def spare(calls: int) -> float:  # the rule, with its numbers: 10-minute cancel, 10 s a call
        return 1.5 * (600 + calls * 10)

    expected = state.deadline - spare(answers.unfinished) - spare(items)
    assert answers.fallback_at == pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize(
    ("service", "point"),
    [
        ("anthropic", "invoked"),
        ("gemini", "flexed"),
        ("vertex-gemini", "flexed"),
        ("together", "invoked"),
        ("xai", "invoked"),
    ],
)
def test_a_fallback_call_a_kill_lost_is_never_sent_blind_again(
    batch_emulator_factory, tmp_path, fixture_dir, monkeypatch, service, point
):
    """Killed after a fallback call was paid for (the service ran it) and before the
    journal said so: the same command again never sends that request blind — its case
    ends in an error row naming --resend-unknown — and the ledger shows each once."""
    from batchbench._failpoints import Crash

    extra = ["--allow-list-price"] if point == "invoked" else []
    rig, emu, args, _ = _rig_run(
        batch_emulator_factory, tmp_path, fixture_dir, service, "--deadline", "+3h", *extra
    )
    emu.store.settings.flex_busy_tries = 0
    monkeypatch.setenv("BATCHBENCH_FAILPOINT", f"{point}:1:raise")
    with pytest.raises(Crash):
        run_cli(*args, env=rig.env(emu))
    monkeypatch.delenv("BATCHBENCH_FAILPOINT")
    [lost] = [e["custom_id"] for e in emu.ledger()["executions"] if e["batch_id"] in ALONE]
    proc = run_cli(*args, env=rig.env(emu))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # that case: an error row
    assert "--resend-unknown" in " ".join(proc.stderr.split())
    ran = [e["custom_id"] for e in emu.ledger()["executions"]]
    assert ran.count(lost) == 1
    assert_no_duplicates(emu)


def test_a_cut_batch_whose_cancelling_reads_as_running_is_told_once(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """Together's cancelling batch reads IN_PROGRESS until it has ended: the batch cut at
    its latest safe moment is told to stop once by the invocation that cut it (it once
    asked again at every step, for ever), and its rest still goes at the list price."""
    rig, emu, args, _ = _rig_run(
        batch_emulator_factory,
        tmp_path,
        fixture_dir,
        "together",
        "--deadline",
        "+3h",
        "--allow-list-price",
    )
    proc = run_cli(*args, env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cancels = {k: n for k, n in emu.calls("together").items() if k.endswith("/cancel")}
    assert cancels and set(cancels.values()) == {1}, cancels  # each cut batch, once
    assert_no_duplicates(emu)


def test_an_xai_call_at_list_price_is_read_as_its_results_page_holds_it(tmp_path):
    """xAI's calls at the list price are written as its batch results are (a page a
    line, a failure as the google.rpc.Status its HTTP status stands for: 400 → 3,
    503 → 14, google.rpc's own mapping) and read back as the reply each was."""
    from batchbench.providers.xai_wire import XAIWire, result_page

    completion = {
        "id": "c1",
        "object": "chat.completion",
        "model": "grok-4.3",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "an answer"}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }
    pages = [
        result_page("ok", 200, completion),
        result_page("bad", 400, {"code": "Client specified an invalid argument", "error": "no"}),
        result_page("busy", 503, {"code": "Service unavailable", "error": "later"}),
    ]
    assert [p["results"][0]["batch_result"].get("error", {}).get("code") for p in pages] == [
        None,
        3,
        14,
    ]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in pages))
    frame = XAIWire().read_results([path])
    got = dict(zip(frame["custom_id"].to_list(), frame["status_code"].to_list()))
    assert got == {"ok": 200, "bad": 400, "busy": 503}
    assert frame.filter(frame["custom_id"] == "ok")["content"].to_list() == ["an answer"]

"""Runs left mid-flight by earlier releases (0.1.0; 0.2.0, one per provider) finish under
this one.

``fixtures/previous-run`` is a run folder that version wrote, with its answers
collected, eight answer retries and every judge batch in flight, and what the
emulator held for those batches. A fresh emulator takes them over (as the real
service outlives a client's process) and this version resumes the run: the
same rows the reference's rules give for the answers and decisions the
emulator returned, and no batch created again.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest
from support import reference as plain_reference
from support.cli import FIXTURE, run_cli
from support.runs import judge_replies

from batchbench.emulator import FakeClock

PREVIOUS = FIXTURE / "previous-run"


def test_a_run_left_mid_flight_by_the_previous_release_finishes(
    batch_emulator_factory, tmp_path, fixture_dir, fixture_dataset
):
    jobs = tmp_path / "jobs"
    shutil.copytree(PREVIOUS / "run", jobs / "prev")
    state = json.loads((PREVIOUS / "emulator-state.json").read_text())
    clock = FakeClock(state["made_at"])  # the service carries on from the snapshot's moment
    emu = batch_emulator_factory(latency=0.05, clock=clock)
    emu.restore(state)
    before = (jobs / "prev" / "journal.jsonl").read_text().splitlines()
    old_batches = {json.loads(x)["batch_id"] for x in before if '"ev":"created"' in x}

    proc = run_cli(
        "run",
        "--run",
        "prev",
        "--answer-model",
        "ans-model",
        "--judge-model",
        "judge-model",
        "--jobs-dir",
        str(jobs),
        "--dataset",
        str(fixture_dir),
        "--base-url",
        emu.base_url,
        "--poll-interval",
        "0.05",
        "--max-requests-per-batch",
        "6",
        env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": ""},
        clock=clock,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "RESUMING run 'prev'" in proc.stdout

    # No batch of the old version was created again: every batch it had made
    # was collected, and the only new ones are judges of the answer retries.
    events = [json.loads(x) for x in (jobs / "prev" / "journal.jsonl").read_text().splitlines()]
    created = Counter(e["sub"] for e in events if e["ev"] == "created")
    assert max(created.values()) == 1
    collected = {e["sub"] for e in events if e["ev"] == "collected"}
    old_subs = {json.loads(x)["sub"] for x in before if '"ev":"created"' in x}
    assert old_subs <= collected
    new = events[len(before) :]
    # 0.1 recorded no service: the first resume records the one it used.
    services = {(e["stage"], e["provider"], e["base_url"]) for e in new if e["ev"] == "service"}
    assert services == {("answers", "openai", emu.base_url), ("judges", "openai", emu.base_url)}
    planned_now = {e["sub"] for e in new if e["ev"] == "plan"}
    assert planned_now and {e["sub"] for e in new if e["ev"] == "created"} == planned_now
    ledger = emu.ledger()
    in_emulator = {b["id"] for b in ledger["batches"]}
    made_now = {e["batch_id"] for e in new if e["ev"] == "created"}
    assert in_emulator == made_now | (old_batches - _collected_before(before))
    executed = Counter(x["custom_id"] for x in ledger["executions"])
    assert executed and max(executed.values()) == 1

    # The rows are what the reference's rules give for what the emulator returned.
    rows = [json.loads(x) for x in (jobs / "prev" / "results.jsonl").read_text().splitlines()]
    by_id = fixture_dataset.by_id()
    assert [r["case_id"] for r in rows] == [c["case_id"] for c in fixture_dataset.cases]
    replies = judge_replies(jobs / "prev")
    for row in rows:
        case = by_id[row["case_id"]]
        assert row["answer"].startswith("Answer to: ") or row["answer"].startswith(
            "Simulated answer (ans-model): "
        )
        matched = {i for i, m in replies[row["case_id"]].items() if m}
        score, components = plain_reference.score_case(case, matched)
        assert row["score"] == score
        assert json.dumps(row["score_components"]) == json.dumps(components)
        assert row["answer_temperature"] == 1 and row["judge_temperature"] == 0


def _collected_before(journal_lines: list[str]) -> set[str]:
    """Batches the old version had already collected (not in the emulator's snapshot)."""
    events = [json.loads(x) for x in journal_lines]
    done = {e["sub"] for e in events if e["ev"] == "collected"}
    return {e["batch_id"] for e in events if e["ev"] == "created" and e["sub"] in done}


V02 = FIXTURE / "v0.2-runs"
V02_MODELS = {
    "openai": "gpt-fixture",
    "anthropic": "claude-fixture",
    "gemini": "gemini-fixture",
    "fireworks": "accounts/fixture/models/fw-fixture",
}
V02_KEYS = {
    "OPENAI_API_KEY": "k",
    "ANTHROPIC_API_KEY": "k",
    "GEMINI_API_KEY": "k",
    "GOOGLE_API_KEY": "",
    "FIREWORKS_API_KEY": "k",
    "FIREWORKS_ACCOUNT_ID": "fixture",
}


def _v02_reply(seen: dict):
    """The fixture script's model (tests/fixtures/v0.2-runs/README.md), judges included: a
    first attempt that fails with a 500 for some prompts, a temperature refused for others,
    Fireworks' effort "none" refused for others."""
    from batchbench.emulator.model import default_content

    def user_of(body):
        if "contents" in body:
            return "".join(p.get("text", "") for p in body["contents"][-1]["parts"])
        return body["messages"][-1]["content"]

    def error(body, status, message, param):
        if "contents" in body:
            return {
                "status_code": status,
                "body": {
                    "error": {
                        "code": status,
                        "message": message,
                        "status": "INVALID_ARGUMENT" if status == 400 else "INTERNAL",
                    }
                },
            }
        if str(body.get("model", "")).startswith("accounts/"):
            return {"status_code": status, "body": {"error": {"message": message}}}
        return {
            "status_code": status,
            "body": {
                "error": {
                    "message": message,
                    "type": "invalid_request_error",
                    "param": param,
                    "code": None,
                }
            },
        }

    def reply(body):
        if "response_format" in body:
            return default_content(body)
        user = user_of(body)
        model = str(body.get("model", "")).removeprefix("models/")
        n = seen[f"{model}|{user}"] = seen.get(f"{model}|{user}", 0) + 1
        h = sum(map(ord, user))
        config = body.get("generation_config") or {}
        temperature = body.get("temperature", config.get("temperature"))
        if n == 1 and h % 5 == 0:
            return error(body, 500, "overloaded", None)
        if h % 5 == 1 and temperature is not None and model != V02_MODELS["anthropic"]:
            return error(
                body, 400, "Unsupported value: 'temperature' does not support 1.", "temperature"
            )
        if h % 5 == 2 and body.get("reasoning_effort") == "none":
            return error(body, 400, "reasoning_effort 'none' is not supported", "reasoning_effort")
        return f"Answer of {model}: {user[:50]}"

    return reply


@pytest.mark.parametrize("moment", ["answers-in-flight", "judges-in-flight"])
@pytest.mark.parametrize("provider", list(V02_MODELS))
def test_runs_left_mid_flight_by_0_2_finish_unchanged(
    moment, provider, batch_emulator_factory, tmp_path, fixture_dir, fixture_dataset
):
    """A 0.2.0 run of each provider, its answers (or its judges and answer retries) in
    flight, finishes under this version: its in-flight batches are collected, never made
    again, no line runs twice, and the rows are the reference's for what the model said."""
    jobs = tmp_path / "jobs"
    name = f"v02-{provider}"
    shutil.copytree(V02 / moment / "jobs" / name, jobs / name)
    state = json.loads((V02 / moment / "emulator-state.json").read_text())
    clock = FakeClock(state["made_at"])
    emu = batch_emulator_factory(
        latency=0.05,
        clock=clock,
        responder=_v02_reply({}),
        models=[*V02_MODELS.values(), "judge-fixture"],
    )
    emu.restore(state)
    before = (jobs / name / "journal.jsonl").read_text().splitlines()
    held = {json.loads(x)["batch_id"] for x in before if '"ev":"created"' in x}
    urls = emu.base_urls
    env = {
        **V02_KEYS,
        "OPENAI_BASE_URL": urls["openai"],
        "ANTHROPIC_BASE_URL": urls["anthropic"],
        "GOOGLE_GEMINI_BASE_URL": urls["gemini"],
        "FIREWORKS_BASE_URL": urls["fireworks"],
    }
    proc = run_cli(
        "run",
        "--run",
        name,
        "--answer-model",
        V02_MODELS[provider],
        "--judge-model",
        "judge-fixture",
        "--jobs-dir",
        str(jobs),
        "--dataset",
        str(fixture_dir),
        "--limit",
        "10",
        "--max-requests-per-batch",
        "4",
        "--poll-interval",
        "0.05",
        "--move-service",
        env=env,
        clock=clock,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert f"RESUMING run '{name}'" in proc.stdout
    events = [json.loads(x) for x in (jobs / name / "journal.jsonl").read_text().splitlines()]
    assert max(Counter(e["sub"] for e in events if e["ev"] == "created").values()) == 1
    new = events[len(before) :]
    assert not {e["batch_id"] for e in new if e["ev"] == "created"} & held  # none made again
    # The snapshot holds every run's batches (one command made the four runs): only this
    # run's, the ones its journal holds, are looked at.
    mine = held | {e["batch_id"] for e in new if e["ev"] == "created"}
    ledger = emu.ledger()

    def ours(batch_id: str, batches: set[str]) -> bool:  # Fireworks journals the short id
        return batch_id in batches or batch_id.rsplit("/", 1)[-1] in batches

    executed = Counter(x["custom_id"] for x in ledger["executions"] if ours(x["batch_id"], mine))
    assert executed and max(executed.values()) == 1
    restored = [b for b in ledger["batches"] if ours(b["id"], held)]
    rows = [json.loads(x) for x in (jobs / name / "results.jsonl").read_text().splitlines()]
    cases = fixture_dataset.cases[:10]
    assert [r["case_id"] for r in rows] == [c["case_id"] for c in cases]
    replies = judge_replies(jobs / name)
    resolved = V02_MODELS[provider]
    for row, case in zip(rows, cases):
        assert row["answer"] == f"Answer of {resolved}: {case['prompt'][:50]}"
        assert row["answer_model"] == resolved
        refused = sum(map(ord, case["prompt"])) % 5 == 1
        sent = provider != "anthropic" and not refused
        assert row["answer_temperature"] == (1 if sent else None), row["case_id"]
        matched = {i for i, m in replies[row["case_id"]].items() if m}
        score, components = plain_reference.score_case(case, matched)
        assert row["score"] == score and row["score_components"] == components
    assert restored  # the snapshot held this run's batches in flight, and they were collected

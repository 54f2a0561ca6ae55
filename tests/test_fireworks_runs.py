"""Fireworks models graded through batch inference jobs: the CLI against the emulator's
Fireworks face, the rows checked against a plain re-implementation of the reference's
Fireworks rules (reference-behaviour.md §9), written here from the spec."""

from __future__ import annotations

import json
import random
import signal
from collections import Counter

import plain_reference
import polars as pl
import pytest
from conftest import assert_one_line_error, run_cli
from crash_harness import kill_and_restart, normalised
from test_run import ERROR_KEYS, KEY, ROW_KEYS, assert_no_duplicates, judge_replies, rows_of

from batchbench import protocol
from batchbench.dataset import load_dataset
from batchbench.emulator.model import default_content

pytest_plugins = ["batchbench.emulator.pytest_plugin"]

FIREWORKS_KEY = "fw-test-marker-77aa"


def env(emu) -> dict[str, str]:
    return {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "", "FIREWORKS_API_KEY": FIREWORKS_KEY,
            "FIREWORKS_BASE_URL": emu.url, "FIREWORKS_ACCOUNT_ID": "my-account"}  # fmt: skip


def args(emu, tmp_path, fixture_dir, *extra, model="glm-5.3", cap=40):
    return ["run", "--answer-model", model, "--judge-model", "judge-model",
            "--jobs-dir", str(tmp_path / "jobs"), "--dataset", str(fixture_dir),
            "--base-url", emu.base_url, "--poll-interval", "0.05",
            "--max-requests-per-batch", str(cap), *extra]  # fmt: skip


# --- the reference's Fireworks rules, from the spec (§9) ----------------------------
def reference_body(prompt: str, resolved: str, effort: str | None, *, temperature=True,
                   low=False) -> dict:  # fmt: skip
    body = {"model": resolved,
            "messages": [{"role": "system", "content": protocol.ANSWER_SYSTEM_MESSAGE},
                         {"role": "user", "content": prompt}],
            "max_tokens": 32000,
            "reasoning_effort": effort or ("low" if low else "none")}  # fmt: skip
    if temperature:
        body["temperature"] = 1
    return body


def reply(content) -> dict:
    choice = {"index": 0, "message": {"role": "assistant", "content": content},
              "finish_reason": "stop"}  # fmt: skip
    usage = {"prompt_tokens": 9, "completion_tokens": 3}
    body = {"id": "c", "object": "chat.completion", "choices": [choice], "usage": usage}
    return {"status_code": 200, "body": body}


def error(code: int, message: str) -> dict:
    return {"status_code": code, "body": {"error": {"message": message}}}


SCRIPT = {
    0: [reply("a plain answer")],
    1: [error(400, "reasoning_effort 'none' is not supported"), reply("after low")],
    2: [error(400, "Temperature must be 0.6 for this model"), reply("no temperature")],
    3: [reply("")] * 2,  # empty every time: an error row
    4: [error(503, "overloaded"), reply("after a 503")],
    5: [error(400, "prompt too long")],  # fails at once
    6: [reply("   ")],  # blank is an answer
}


def scripted(prompts: list[str], seen: dict):
    def responder(body):
        if "response_format" in body:  # the judge, on OpenAI's face
            return default_content(body)
        i = prompts.index(body["messages"][1]["content"])
        seen.setdefault(i, []).append(body)
        replies = SCRIPT.get(i, [reply(f"answer {i}")])
        return replies[min(len(seen[i]) - 1, len(replies) - 1)]

    return responder


def test_a_fireworks_run_has_the_reference_rows(batch_emulator_factory, tmp_path, fixture_dir):
    cases = load_dataset(fixture_dir).cases[:8]
    prompts = [c["prompt"] for c in cases]
    seen: dict = {}
    emu = batch_emulator_factory(responder=scripted(prompts, seen))
    proc = run_cli(*args(emu, tmp_path, fixture_dir, "--limit", "8", "--max-retries", "2"),
                   env=env(emu))  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr  # two cases end in an error
    run_dir = tmp_path / "jobs" / "glm-5.3"
    rows = {r["case_id"]: r for r in rows_of(run_dir / "results.jsonl")}
    replies = judge_replies(run_dir)
    resolved = "accounts/fireworks/models/glm-5p3"
    for i, case in enumerate(cases):
        for n, body in enumerate(seen[i]):
            second = n == 1
            want = reference_body(
                case["prompt"], resolved, None, temperature=not (i == 2 and second),
                low=i == 1 and second,
            )  # fmt: skip
            assert body == want, (i, n)
        row = rows[case["case_id"]]
        script = SCRIPT.get(i, [reply(f"answer {i}")])
        if i == 3:
            assert list(row) == ERROR_KEYS
            assert row["error"] == (
                "RuntimeError: Fireworks request failed after 2 attempts: Fireworks returned an"
                " empty message"
            )
        elif i == 5:
            written = json.dumps({"code": 400, "message": "prompt too long"})
            assert row["error"] == f"RuntimeError: HTTP 400: {written}"
            assert len(seen[i]) == 1
        else:
            assert list(row) == ROW_KEYS
            assert row["answer"] == script[len(seen[i]) - 1]["body"]["choices"][0]["message"][
                "content"]  # fmt: skip
            assert row["answer_model"] == "glm-5.3"
            assert row["answer_temperature"] == (None if i == 2 else 1)
            assert row["answer_reasoning_effort"] is None
            matched = {k for k, v in replies[case["case_id"]].items() if v}
            score, components = plain_reference.score_case(case, matched)
            assert row["score"] == score and row["score_components"] == components
    assert [len(seen[i]) for i in (1, 2, 4, 6)] == [2, 2, 2, 1]
    # Requests with other parameters than their first job went to jobs of their own.
    jobs = [j for j in emu.store.fireworks.made if j.lines]
    params = {j.lines[0]["custom_id"].split("-", 2)[2]: j.parameters for j in jobs[1:]}
    low = json.loads(params[cases[1]["case_id"]]["extraBody"])
    assert low == {"reasoning_effort": "low"} and "temperature" in params[cases[1]["case_id"]]
    assert "temperature" not in params[cases[2]["case_id"]]
    assert all(j.model == resolved for j in jobs)


def test_effort_max_is_sent_as_max(batch_emulator_factory, tmp_path, fixture_dir):
    seen: list = []
    emu = batch_emulator_factory(responder=lambda b: seen.append(b) or default_content(b))
    argv = args(emu, tmp_path, fixture_dir, "--smoke", "--reasoning-effort", "max",
                model="kimi-k3")  # fmt: skip
    assert run_cli(*argv, env=env(emu)).returncode == 0
    answers = [b for b in seen if "response_format" not in b]
    assert answers and {b["reasoning_effort"] for b in answers} == {"max"}
    assert {b["model"] for b in answers} == {"accounts/fireworks/models/kimi-k3"}
    rows = rows_of(tmp_path / "jobs" / "kimi-k3-smoke" / "results.jsonl")
    assert {r["answer_reasoning_effort"] for r in rows} == {"max"}


def test_sigkill_at_the_create_call_and_at_random_pays_each_answer_once(
    batch_emulator_factory, tmp_path, fixture_dir
):
    reference = batch_emulator_factory()
    assert run_cli(*args(reference, tmp_path / "ref", fixture_dir, "--limit", "12"),
                   env=env(reference)).returncode == 0  # fmt: skip
    expected = normalised(tmp_path / "ref" / "jobs" / "glm-5.3")
    emu = batch_emulator_factory(latency=0.3)
    argv = args(emu, tmp_path, fixture_dir, "--limit", "12", cap=3)
    journal = tmp_path / "jobs" / "glm-5.3" / "journal.jsonl"
    for point in ("uploaded:1", "created:1", "created:2"):
        proc = run_cli(*argv, env={**env(emu), "BATCHBENCH_FAILPOINT": point}, real=True)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
    kill_and_restart(argv, journal, random.Random(5), 6, env(emu))
    proc = run_cli(*argv, env=env(emu), real=True)
    assert proc.returncode == 0, proc.stderr
    assert normalised(tmp_path / "jobs" / "glm-5.3") == expected
    assert_no_duplicates(emu)
    assert any(e.get("adopted") for e in map(json.loads, journal.read_text().splitlines())
               if e["ev"] == "created")  # fmt: skip


def test_four_providers_in_one_command(batch_emulator, tmp_path, fixture_dir):
    emu = batch_emulator
    argv = args(emu, tmp_path, fixture_dir, "--limit", "6", "--run", "four")
    at = argv.index("--answer-model")
    models = ["ans-model", "claude-opus-5", "gemini-3-flash-preview", "glm-5.3"]
    argv[at : at + 2] = [a for m in models for a in ("--answer-model", m)]
    more = {"ANTHROPIC_API_KEY": "ak", "ANTHROPIC_BASE_URL": emu.url, "GEMINI_API_KEY": "gk",
            "GOOGLE_GEMINI_BASE_URL": emu.url}  # fmt: skip
    proc = run_cli(*argv, env={**env(emu), **more})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = ["four-ans-model", "four-claude-opus-5", "four-gemini-3-flash-preview", "four-glm-5.3"]
    for name in names:
        assert len(rows_of(tmp_path / "jobs" / name / "results.jsonl")) == 6
    providers = Counter(b["provider"] for b in emu.ledger()["batches"])
    assert providers == {"openai": 5, "anthropic": 1, "gemini": 1, "fireworks": 1}
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    assert run_cli("compare", *names, *jobs).returncode == 0
    status = json.loads(run_cli("status", *names, *jobs, "--json").stdout)
    assert [s["status"] for s in status] == ["complete"] * 4
    listing = run_cli("list", *jobs).stdout
    assert all(name in listing for name in names)
    out = tmp_path / "all.csv"
    assert run_cli("export", *names, *jobs, "-o", str(out)).returncode == 0
    exported = pl.read_csv(out)
    assert exported.height == 24 and set(exported["run"]) == set(names)
    assert run_cli("report", *names, *jobs, "-o", str(tmp_path / "r.html")).returncode == 0
    for path in (tmp_path / "jobs").rglob("*"):
        if path.is_file():
            assert FIREWORKS_KEY.encode() not in path.read_bytes()


def test_without_an_account_a_fireworks_model_is_one_line(batch_emulator, tmp_path, fixture_dir):
    proc = run_cli(*args(batch_emulator, tmp_path, fixture_dir, "--smoke"),
                   env={**env(batch_emulator), "FIREWORKS_ACCOUNT_ID": ""})  # fmt: skip
    assert_one_line_error(proc, "FIREWORKS_ACCOUNT_ID")
    assert batch_emulator.ledger()["batches"] == []


def test_status_refresh_list_cancel_dry_run_and_max_cost_for_a_fireworks_run(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(paused=True)
    argv = args(emu, tmp_path, fixture_dir, "--limit", "6", "--no-wait", cap=3)
    assert run_cli(*argv, env=env(emu)).returncode == 3
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    refresh = run_cli("status", "glm-5.3", *jobs, "--refresh", env=env(emu))
    live = [line for line in refresh.stdout.splitlines() if line.startswith("live: ")]
    assert refresh.returncode == 0 and len(live) == 2, refresh.stdout
    assert "glm-5.3" in run_cli("list", *jobs).stdout
    proc = run_cli("cancel", "glm-5.3", *jobs, env=env(emu))
    assert proc.returncode == 0 and "cancelled 2 batch(es)" in proc.stdout, proc.stderr
    emu.flush()
    assert run_cli(*argv, env=env(emu)).returncode == 3
    status = json.loads(run_cli("status", "glm-5.3", *jobs, "--json").stdout)
    assert status["status"] == "cancelled" and status["cases"]["pending"] == 6
    assert {b["status"] for b in emu.ledger()["batches"]} == {"JOB_STATE_CANCELLED"}
    # GLM 5.3 has no public price: the dry run says so, --max-cost refuses, --pricing fills in.
    base = ["run", "--answer-model", "glm-5.3", "--judge-model", "gpt-4.1",
            "--dataset", str(fixture_dir), "--jobs-dir", str(tmp_path / "dry")]  # fmt: skip
    answers = json.loads(run_cli(*base, "--dry-run", "--json").stdout)["stages"]["answers"]
    assert answers["batch_usd"] is None
    proc = run_cli(*base, "--max-cost", "100", env={"FIREWORKS_API_KEY": "", "OPENAI_API_KEY": ""})
    assert_one_line_error(proc, "--max-cost", "no price for 'glm-5.3'", "nothing was submitted")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"batch_discount": 0.5, "models": {
        "accounts/fireworks/models/glm-5p3": {"input": 1.0, "output": 4.0}}}))  # fmt: skip
    answers = json.loads(run_cli(*base, "--dry-run", "--json", "--pricing", str(prices)).stdout
                         )["stages"]["answers"]  # fmt: skip
    expected = (answers["input_tokens"] * 1 + answers["output_tokens"] * 4) / 1e6 / 2
    assert answers["batch_usd"] == pytest.approx(expected, abs=1e-6)  # shown to 6 places
    assert not (tmp_path / "dry").exists()

"""Claude models graded through Message Batches: the CLI against the emulator's Anthropic
face, the rows checked against a plain re-implementation of the reference's rules
(reference-behaviour.md §9), written here from the spec and sharing no code with
batchbench's Anthropic wire."""

from __future__ import annotations

import json
import random
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import plain_reference
import pytest
from conftest import assert_one_line_error, run_cli
from crash_harness import kill_and_restart, normalised
from test_run import ERROR_KEYS, KEY, ROW_KEYS, assert_no_duplicates, judge_replies, rows_of

from batchbench import protocol
from batchbench.dataset import load_dataset
from batchbench.emulator.model import default_content

pytest_plugins = ["batchbench.emulator.pytest_plugin"]

ANTHROPIC_KEY = "sk-ant-test-marker-2b9d"


def env(emu) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": KEY,
        "OPENAI_BASE_URL": "",
        "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
        "ANTHROPIC_BASE_URL": emu.url,
    }


def args(emu, tmp_path, fixture_dir, *extra, model="opus-5", cap=40):
    return ["run", "--answer-model", model, "--judge-model", "judge-model",
            "--jobs-dir", str(tmp_path / "jobs"), "--dataset", str(fixture_dir),
            "--base-url", emu.base_url, "--poll-interval", "0.05",
            "--max-requests-per-batch", str(cap), *extra]  # fmt: skip


# --- the reference's Anthropic rules, from the spec (§9) ----------------------------
def reference_body(prompt: str, resolved: str, effort: str | None) -> dict:
    body = {"model": resolved, "max_tokens": 32000,
            "messages": [{"role": "user", "content": prompt}],
            "system": protocol.ANSWER_SYSTEM_MESSAGE}  # fmt: skip
    if effort is not None:
        body["output_config"] = {"effort": effort}  # "max" stays "max" for Anthropic
    return body


def reference_answer(message: dict) -> str:
    texts = [b["text"] for b in message["content"] if b.get("type") == "text" and b.get("text")]
    return "\n".join(texts).strip()


def message(*blocks: dict, stop: str = "end_turn") -> dict:
    return {"status_code": 200, "body": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-opus-5",
        "content": list(blocks), "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5}}}  # fmt: skip


def text(t: str) -> dict:
    return {"type": "text", "text": t}


THINKING = {"type": "thinking", "thinking": "let me think", "signature": "sig"}


def error(kind: str, status: int) -> dict:
    return {"status_code": status, "body": {"type": "error",
            "error": {"type": kind, "message": f"{kind} for this request"}}}  # fmt: skip


# What each case (by its position in the selection) is answered, attempt by attempt.
SCRIPT = {
    0: [message(THINKING, text("first"), text("  second  "))],
    1: [
        message(
            text(""), text(" only this "), {"type": "tool_use", "id": "t", "name": "f", "input": {}}
        )
    ],  # fmt: skip
    2: [message(THINKING), message(text("after an empty one"))],  # empty, then an answer
    3: [message(THINKING, stop="max_tokens")] * 2,  # empty every time: an error row
    4: [error("invalid_request_error", 400)],  # fails at once
    5: [error("overloaded_error", 529), message(text("once overloaded"))],
    6: [error("overloaded_error", 529)] * 2,  # overloaded every time: retries spent
    7: [message({"type": "redacted_thinking", "data": "x"}, text("plain"))],
}


def scripted(prompts: list[str], seen: dict):
    def responder(params):
        if "response_format" in params:  # the judge, on OpenAI's face
            return default_content(params)
        prompt = params["messages"][0]["content"]
        i = prompts.index(prompt)
        seen.setdefault(i, []).append(params)
        replies = SCRIPT.get(i, [message(text(f"answer {i}"))])
        return replies[min(len(seen[i]) - 1, len(replies) - 1)]

    return responder


def error_json(reply: dict) -> str:
    """The error object as the service writes it in a results line."""
    return json.dumps(reply["body"])


def test_a_claude_run_has_the_reference_rows(batch_emulator_factory, tmp_path, fixture_dir):
    dataset = load_dataset(fixture_dir)
    cases = dataset.cases[:10]
    prompts = [c["prompt"] for c in cases]
    seen: dict = {}
    emu = batch_emulator_factory(responder=scripted(prompts, seen))
    proc = run_cli(*args(emu, tmp_path, fixture_dir, "--limit", "10", "--max-retries", "2",
                         "--reasoning-effort", "max"), env=env(emu))  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr  # three cases end in an error
    run_dir = tmp_path / "jobs" / "opus-5"
    rows = {r["case_id"]: r for r in rows_of(run_dir / "results.jsonl")}
    replies = judge_replies(run_dir)
    for i, case in enumerate(cases):
        # What the model was sent: the reference's body, max effort kept as max.
        for params in seen[i]:
            assert params == reference_body(case["prompt"], "claude-opus-5", "max")
            assert list(params) == ["model", "max_tokens", "messages", "system", "output_config"]
        row = rows[case["case_id"]]
        script = SCRIPT.get(i, [message(text(f"answer {i}"))])
        if i == 3:
            assert list(row) == ERROR_KEYS
            assert row["error"] == (
                "RuntimeError: Anthropic request failed after 2 attempts: Anthropic returned"
                " an empty text message stop=max_tokens"
            )
        elif i == 4:
            assert row["error"] == f"RuntimeError: HTTP 400: {error_json(script[0])}"
            assert len(seen[i]) == 1  # never retried
        elif i == 6:
            assert row["error"] == (
                "RuntimeError: Anthropic request failed after 2 attempts:"
                f" HTTP 529: {error_json(script[0])}"
            )
        else:
            assert list(row) == ROW_KEYS
            last = script[len(seen[i]) - 1]
            assert row["answer"] == reference_answer(last["body"])
            assert row["answer_model"] == "opus-5"  # the name as given
            assert row["answer_temperature"] is None and row["judge_temperature"] == 0
            assert row["answer_reasoning_effort"] == "max"
            matched = {k for k, v in replies[case["case_id"]].items() if v}
            score, components = plain_reference.score_case(case, matched)
            assert row["score"] == score and row["score_components"] == components
    assert [len(seen[i]) for i in (2, 5)] == [2, 2]  # empty and overloaded: sent again
    assert {rows[cases[i]["case_id"]]["answer"] for i in (0, 1)} == {"first\n  second", "only this"}


def test_a_group_of_an_openai_and_a_claude_model_in_one_command(
    batch_emulator, tmp_path, fixture_dir
):
    emu = batch_emulator
    argv = args(emu, tmp_path, fixture_dir, "--limit", "6", "--run", "grp")
    argv[argv.index("--answer-model") + 1 : argv.index("--answer-model") + 2] = [
        "ans-model", "--answer-model", "claude-sonnet-4-6",
    ]  # fmt: skip
    proc = run_cli(*argv, env=env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    names = ["grp-ans-model", "grp-claude-sonnet-4-6"]
    for name in names:
        rows = rows_of(tmp_path / "jobs" / name / "results.jsonl")
        assert len(rows) == 6 and all("score" in r for r in rows)
    claude = rows_of(tmp_path / "jobs" / names[1] / "results.jsonl")
    assert all(r["answer"].startswith("Simulated answer (claude-sonnet-4-6)") for r in claude)
    assert all(r["answer_temperature"] is None for r in claude)
    ledger = emu.ledger()
    assert Counter(b["provider"] for b in ledger["batches"]) == {"openai": 3, "anthropic": 1}
    status = json.loads(run_cli("status", *names, *jobs, "--json").stdout)
    assert [s["status"] for s in status] == ["complete", "complete"]
    assert status[1]["cost"]["stages"]["answers"]["batch_usd"] > 0  # Claude's price, known
    listing = run_cli("list", *jobs).stdout
    assert all(name in listing for name in names)
    assert run_cli("compare", *names, *jobs).returncode == 0
    page = tmp_path / "r.html"
    assert run_cli("report", *names, *jobs, "-o", str(page)).returncode == 0
    assert "claude-sonnet-4-6" in page.read_text()
    out = tmp_path / "x.csv"
    assert run_cli("export", *names, *jobs, "-o", str(out)).returncode == 0
    refresh = run_cli("status", names[1], *jobs, "--refresh", env=env(emu))
    assert refresh.returncode == 0 and "no batch in flight" in refresh.stdout


def test_dry_run_and_max_cost_price_claude_runs(tmp_path, fixture_dir):
    base = ["run", "--answer-model", "opus-5", "--answer-model", "gpt-4o-mini",
            "--judge-model", "gpt-4.1", "--dataset", str(fixture_dir),
            "--jobs-dir", str(tmp_path / "jobs")]  # fmt: skip
    plan = json.loads(run_cli(*base, "--dry-run", "--json").stdout)
    claude = next(p for p in plan if p["stages"]["answers"]["model"] == "opus-5")
    answers = claude["stages"]["answers"]
    # claude-opus-5 at $5 / $25 per 1M tokens, half at batch price.
    expected = (answers["input_tokens"] * 5 + answers["output_tokens"] * 25) / 1e6 / 2
    assert answers["batch_usd"] == pytest.approx(expected, rel=1e-6)
    proc = run_cli(*base, "--max-cost", "0.01", env={"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": ""})
    assert_one_line_error(proc, "--max-cost", "nothing was submitted")
    assert not (tmp_path / "jobs" / "opus-5").exists()


def test_sigkill_at_the_create_call_and_at_random_pays_each_answer_once(
    batch_emulator_factory, tmp_path, fixture_dir
):
    reference = batch_emulator_factory()
    assert run_cli(*args(reference, tmp_path / "ref", fixture_dir, "--limit", "12"),
                   env=env(reference)).returncode == 0  # fmt: skip
    expected = normalised(tmp_path / "ref" / "jobs" / "opus-5")
    emu = batch_emulator_factory(latency=0.3)
    argv = args(emu, tmp_path, fixture_dir, "--limit", "12", cap=3)
    journal = tmp_path / "jobs" / "opus-5" / "journal.jsonl"
    for nth in (1, 2):  # the create returned, its batch id not journaled: found again
        proc = run_cli(*argv, env={**env(emu), "BATCHBENCH_FAILPOINT": f"created:{nth}"},
                       real=True)  # fmt: skip
        assert proc.returncode == -signal.SIGKILL, proc.stderr
    events = [json.loads(x) for x in journal.read_text().splitlines()]
    kinds, _ = kill_and_restart(argv, journal, random.Random(7), 6, env(emu))
    proc = run_cli(*argv, env=env(emu), real=True)
    assert proc.returncode == 0, proc.stderr
    assert normalised(tmp_path / "jobs" / "opus-5") == expected
    assert_no_duplicates(emu)
    adopted = [e for e in map(json.loads, journal.read_text().splitlines())
               if e["ev"] == "created" and e.get("adopted")]  # fmt: skip
    assert adopted and sum(kinds.values()) >= 1, (events, kinds)


def test_expired_lines_are_sent_again_without_spending_retries(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(latency=36000, completion_window=7200, paused=True)
    argv = args(emu, tmp_path, fixture_dir, "--limit", "12", cap=4)
    assert run_cli(*argv, "--no-wait", env=env(emu)).returncode == 3  # three batches made
    emu.tick(time.time() + 7300)  # each ran one line before its window closed
    emu.store.settings.latency, emu.store.settings.completion_window = 0.05, 86400
    emu.store.settings.paused = False
    proc = run_cli(*argv, env=env(emu))
    assert proc.returncode == 0, proc.stderr
    assert len(rows_of(tmp_path / "jobs" / "opus-5" / "results.jsonl")) == 12
    ledger = emu.ledger()
    claude = [b for b in ledger["batches"] if b["provider"] == "anthropic"]
    assert len(claude) > 3  # expired lines were sent again, in new batches
    assert_no_duplicates(emu)
    status = json.loads(run_cli("status", "opus-5", "--jobs-dir", str(tmp_path / "jobs"),
                                "--json").stdout)  # fmt: skip
    assert status["losses"]["answers"] == 9  # expired: sent again, not spending retries


def test_a_claude_run_is_cancelled_through_message_batches(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(paused=True)
    argv = args(emu, tmp_path, fixture_dir, "--limit", "6", "--no-wait", cap=3)
    assert run_cli(*argv, env=env(emu)).returncode == 3
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    text = run_cli("status", "opus-5", *jobs).stdout
    assert "processing 3" in text  # all Anthropic says before the end
    proc = run_cli("cancel", "opus-5", *jobs, env=env(emu))
    assert proc.returncode == 0 and "cancelled 2 batch(es)" in proc.stdout, proc.stderr
    emu.flush()
    assert run_cli(*argv, env=env(emu)).returncode == 3
    status = json.loads(run_cli("status", "opus-5", *jobs, "--json").stdout)
    assert status["status"] == "cancelled" and status["cases"]["pending"] == 6
    assert {b["status"] for b in emu.ledger()["batches"]} == {"ended"}


def test_without_the_anthropic_sdk_a_claude_model_is_one_line(tmp_path, fixture_dir):
    code = (
        "import sys; sys.modules['anthropic'] = None\n"
        "from batchbench.cli import main\n"
        "sys.argv = ['batchbench', *sys.argv[1:]]\n"
        "main()\n"
    )
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", code, "run", "--answer-model", "claude-opus-5",
         "--judge-model", "gpt-4.1", "--dataset", str(fixture_dir),
         "--jobs-dir", str(tmp_path / "jobs")],
        capture_output=True, text=True,
        env={"PATH": "/usr/bin", "ANTHROPIC_API_KEY": "x", "OPENAI_API_KEY": "y"},
    )  # fmt: skip
    assert_one_line_error(proc, "'anthropic'", "pip install 'batchbench[anthropic]'")
    assert not any(Path(tmp_path / "jobs").glob("*/journal.jsonl"))


def test_keys_are_never_written(batch_emulator, tmp_path, fixture_dir):
    emu = batch_emulator
    proc = run_cli(*args(emu, tmp_path, fixture_dir, "--limit", "3"), env=env(emu))
    assert proc.returncode == 0
    for path in (tmp_path / "jobs").rglob("*"):
        if path.is_file():
            assert ANTHROPIC_KEY.encode() not in path.read_bytes(), path
    assert ANTHROPIC_KEY not in proc.stdout + proc.stderr


def test_the_demo_grades_a_claude_model_on_the_emulator(tmp_path):
    proc = run_cli("demo", "--answer-model", "claude-sim", "--jobs-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_json = json.loads((tmp_path / "demo" / "run.json").read_text())
    assert run_json["services"]["answers"]["provider"] == "anthropic"
    rows = rows_of(tmp_path / "demo" / "results.jsonl")
    assert rows and all(r["answer"].startswith("Simulated answer (claude-sim)") for r in rows)


def test_faults_and_the_services_bad_days_end_in_a_good_days_rows(
    batch_emulator_factory, tmp_path, fixture_dir
):
    reference = batch_emulator_factory()
    argv = args(reference, tmp_path / "ref", fixture_dir, "--limit", "16", cap=5)
    assert run_cli(*argv, env=env(reference)).returncode == 0
    emu = batch_emulator_factory(
        fault_rate=0.2, seed=9, anomalies={"missing-lines": 0.3, "long-finalizing": 4.0}
    )
    proc = run_cli(*args(emu, tmp_path, fixture_dir, "--limit", "16", cap=5), env=env(emu))
    assert proc.returncode == 0, proc.stderr
    expected = normalised(tmp_path / "ref" / "jobs" / "opus-5")
    assert normalised(tmp_path / "jobs" / "opus-5") == expected
    assert_no_duplicates(emu)
    assert emu.ledger()["faults"].get("529", 0) > 0


def test_a_misspelt_claude_model_or_a_wrong_base_url_is_one_line_before_anything_is_paid(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(unknown_models=["claude-opus-55"])
    proc = run_cli(*args(emu, tmp_path, fixture_dir, "--smoke", model="claude-opus-55"),
                   env=env(emu))  # fmt: skip
    assert_one_line_error(proc, "'claude-opus-55'", emu.url)
    wrong = {**env(emu), "ANTHROPIC_BASE_URL": f"{emu.url}/v1"}  # the SDK adds /v1 itself
    proc = run_cli(*args(emu, tmp_path, fixture_dir, "--smoke"), env=wrong)
    assert_one_line_error(proc, f"{emu.url}/v1", "ANTHROPIC_BASE_URL")
    assert emu.ledger()["batches"] == []

"""Gemini models graded through Batch Mode: the CLI against the emulator's Gemini face, the
rows checked against a plain re-implementation of the reference's Gemini rules
(reference-behaviour.md §9), written here from the spec."""

from __future__ import annotations

import json
import random
import signal
import subprocess
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

GEMINI_KEY = "gemini-test-marker-5e1f"


def env(emu) -> dict[str, str]:
    return {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "", "GEMINI_API_KEY": GEMINI_KEY,
            "GOOGLE_API_KEY": "", "GOOGLE_GEMINI_BASE_URL": emu.url}  # fmt: skip


def args(emu, tmp_path, fixture_dir, *extra, model="gemini-3.1-pro", cap=40):
    return ["run", "--answer-model", model, "--judge-model", "judge-model",
            "--jobs-dir", str(tmp_path / "jobs"), "--dataset", str(fixture_dir),
            "--base-url", emu.base_url, "--poll-interval", "0.05",
            "--max-requests-per-batch", str(cap), *extra]  # fmt: skip


# --- the reference's Gemini rules, from the spec (§9), in the batch file's names -----
def reference_request(prompt: str, effort: str | None, temperature: bool = True) -> dict:
    config: dict = {"temperature": 1} if temperature else {}
    config["max_output_tokens"] = 32000
    if effort is not None:  # max → high, upper-cased, thoughts not included
        level = "high" if effort == "max" else effort
        config["thinking_config"] = {"thinking_level": level.upper(), "include_thoughts": False}
    return {"contents": [{"role": "user", "parts": [{"text": protocol.ANSWER_SYSTEM_MESSAGE}]},
                         {"role": "user", "parts": [{"text": prompt}]}],
            "generation_config": config}  # fmt: skip


def reference_answer(response: dict) -> str:
    parts = response["candidates"][0]["content"]["parts"] if response.get("candidates") else []
    return "".join(p["text"] for p in parts if p.get("text") and not p.get("thought")).strip()


def reply(*parts: dict, more: list | None = None) -> dict:
    candidates = [{"content": {"parts": list(parts), "role": "model"}, "finishReason": "STOP"}]
    return {"status_code": 200, "body": {"candidates": candidates + (more or []),
            "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 4,
                              "thoughtsTokenCount": 3}}}  # fmt: skip


def text(t: str, thought: bool = False) -> dict:
    return {"text": t, "thought": True} if thought else {"text": t}


def error(code: int, message: str, status: str = "INVALID_ARGUMENT") -> dict:
    return {"status_code": code,
            "body": {"error": {"code": code, "message": message, "status": status}}}  # fmt: skip


SCRIPT = {
    0: [reply(text("thinking it over", thought=True), text("a"), text("b "))],
    1: [reply(text("  x  "), more=[{"content": {"parts": [text("second candidate")]}}])],
    2: [reply(text("only thoughts", thought=True)), reply(text("then an answer"))],
    3: [reply()] * 2,  # no parts at all, every time: an error row
    4: [error(400, "temperature is not supported for this model"), reply(text("no temp"))],
    5: [error(401, "API key expired", "UNAUTHENTICATED"), reply(text("after a 401"))],
    6: [error(400, "Request contains an invalid argument.")],  # fails at once
    7: [error(503, "The model is overloaded.", "UNAVAILABLE")] * 2,
}


def scripted(prompts: list[str], seen: dict):
    def responder(request):
        if "response_format" in request:  # the judge, on OpenAI's face
            return default_content(request)
        i = prompts.index(request["contents"][1]["parts"][0]["text"])
        seen.setdefault(i, []).append(request)
        replies = SCRIPT.get(i, [reply(text(f"answer {i}"))])
        return replies[min(len(seen[i]) - 1, len(replies) - 1)]

    return responder


def test_a_gemini_run_has_the_reference_rows(batch_emulator_factory, tmp_path, fixture_dir):
    cases = load_dataset(fixture_dir).cases[:10]
    prompts = [c["prompt"] for c in cases]
    seen: dict = {}
    emu = batch_emulator_factory(responder=scripted(prompts, seen))
    proc = run_cli(*args(emu, tmp_path, fixture_dir, "--limit", "10", "--max-retries", "2",
                         "--reasoning-effort", "max"), env=env(emu))  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr  # three cases end in an error
    run_dir = tmp_path / "jobs" / "gemini-3.1-pro"
    rows = {r["case_id"]: r for r in rows_of(run_dir / "results.jsonl")}
    replies = judge_replies(run_dir)
    for i, case in enumerate(cases):
        for n, request in enumerate(seen[i]):
            temperature = not (i == 4 and n == 1)  # refused once: sent again without it
            expected = reference_request(case["prompt"], "max", temperature)
            assert request == {**expected, "model": "models/gemini-3.1-pro-preview"}
        row = rows[case["case_id"]]
        script = SCRIPT.get(i, [reply(text(f"answer {i}"))])
        if i == 3:
            assert list(row) == ERROR_KEYS
            assert row["error"] == (
                "RuntimeError: Gemini request failed after 2 attempts: Gemini returned an"
                " empty message"
            )
        elif i == 6:
            body = json.dumps(script[0]["body"]["error"])
            assert row["error"] == f"RuntimeError: HTTP 400: {body}"
            assert len(seen[i]) == 1  # never retried
        elif i == 7:
            body = json.dumps(script[0]["body"]["error"])
            assert row["error"] == (
                f"RuntimeError: Gemini request failed after 2 attempts: HTTP 503: {body}"
            )
        else:
            assert list(row) == ROW_KEYS
            assert row["answer"] == reference_answer(script[len(seen[i]) - 1]["body"])
            assert row["answer_model"] == "gemini-3.1-pro"  # the alias, as given
            assert row["answer_temperature"] == (None if i == 4 else 1)
            assert row["answer_reasoning_effort"] == "high"  # max, as Gemini is sent it
            matched = {k for k, v in replies[case["case_id"]].items() if v}
            score, components = plain_reference.score_case(case, matched)
            assert row["score"] == score and row["score_components"] == components
    assert [len(seen[i]) for i in (2, 4, 5)] == [2, 2, 2]
    assert rows[cases[0]["case_id"]]["answer"] == "ab"
    assert rows[cases[1]["case_id"]]["answer"] == "x"
    status = json.loads(run_cli("status", "gemini-3.1-pro", "--jobs-dir", str(tmp_path / "jobs"),
                                "--json").stdout)  # fmt: skip
    usage = status["cost"]["stages"]["answers"]
    scripted_ok = 7  # successful replies: 3 tokens of thought billed as output in each
    assert usage["completion_tokens"] >= scripted_ok * 7 and usage["reasoning_tokens"] > 0


def test_sigkill_at_the_create_call_and_at_random_pays_each_answer_once(
    batch_emulator_factory, tmp_path, fixture_dir
):
    reference = batch_emulator_factory()
    assert run_cli(*args(reference, tmp_path / "ref", fixture_dir, "--limit", "12"),
                   env=env(reference)).returncode == 0  # fmt: skip
    expected = normalised(tmp_path / "ref" / "jobs" / "gemini-3.1-pro")
    emu = batch_emulator_factory(latency=0.3)
    argv = args(emu, tmp_path, fixture_dir, "--limit", "12", cap=3)
    journal = tmp_path / "jobs" / "gemini-3.1-pro" / "journal.jsonl"
    for nth in (1, 2):  # the job was made, its name not journaled: found by display name
        proc = run_cli(*argv, env={**env(emu), "BATCHBENCH_FAILPOINT": f"created:{nth}"},
                       real=True)  # fmt: skip
        assert proc.returncode == -signal.SIGKILL, proc.stderr
    kill_and_restart(argv, journal, random.Random(11), 6, env(emu))
    proc = run_cli(*argv, env=env(emu), real=True)
    assert proc.returncode == 0, proc.stderr
    assert normalised(tmp_path / "jobs" / "gemini-3.1-pro") == expected
    assert_no_duplicates(emu)
    adopted = [e for e in map(json.loads, journal.read_text().splitlines())
               if e["ev"] == "created" and e.get("adopted")]  # fmt: skip
    assert adopted


def test_a_job_stuck_in_pending_is_cancelled_and_sent_again_once(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(anomalies={"stuck-pending": 1.0})  # every job, every time
    argv = args(emu, tmp_path, fixture_dir, "--limit", "4", "--no-wait", "--resubmit-after", "0.5")
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    assert run_cli(*argv, env=env(emu)).returncode == 3  # a job made; it never starts
    time.sleep(0.6)
    proc = run_cli(*argv, env=env(emu))
    assert proc.returncode == 3 and "has not started 0.5s after it was created" in proc.stderr
    for _ in range(4):  # collect the cancelled job, send its requests again, wait
        time.sleep(0.6)
        assert run_cli(*argv, env=env(emu)).returncode == 3
    made = [b for b in emu.ledger()["batches"] if b["provider"] == "gemini"]
    assert [b["status"] for b in made] == ["CANCELLED", "PENDING"]  # once, not again
    status = json.loads(run_cli("status", "gemini-3.1-pro", *jobs, "--json").stdout)
    assert status["stalled"] == 1
    assert "cancelled and their requests sent again" in run_cli("status", "gemini-3.1-pro",
                                                               *jobs).stdout  # fmt: skip


def test_succeeded_before_its_file_is_waited_out(batch_emulator_factory, tmp_path, fixture_dir):
    good = batch_emulator_factory()
    assert run_cli(*args(good, tmp_path / "ref", fixture_dir, "--limit", "8", cap=3),
                   env=env(good)).returncode == 0  # fmt: skip
    emu = batch_emulator_factory(anomalies={"succeeded-before-file": 1.0}, latency=0.2)
    proc = run_cli(*args(emu, tmp_path, fixture_dir, "--limit", "8", cap=3), env=env(emu))
    assert proc.returncode == 0, proc.stderr
    expected = normalised(tmp_path / "ref" / "jobs" / "gemini-3.1-pro")
    assert normalised(tmp_path / "jobs" / "gemini-3.1-pro") == expected
    journal = (tmp_path / "jobs" / "gemini-3.1-pro" / "journal.jsonl").read_text()
    assert "responses file not yet named" in journal  # it was seen, and waited out
    assert_no_duplicates(emu)


def test_openai_claude_and_gemini_in_one_command(batch_emulator, tmp_path, fixture_dir):
    emu = batch_emulator
    argv = args(emu, tmp_path, fixture_dir, "--limit", "6", "--run", "trio")
    at = argv.index("--answer-model")
    argv[at : at + 2] = ["--answer-model", "ans-model", "--answer-model", "claude-opus-5",
                         "--answer-model", "gemini-3-flash-preview"]  # fmt: skip
    claude = {"ANTHROPIC_API_KEY": "ak", "ANTHROPIC_BASE_URL": emu.url}
    proc = run_cli(*argv, env={**env(emu), **claude})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = ["trio-ans-model", "trio-claude-opus-5", "trio-gemini-3-flash-preview"]
    for name in names:
        assert len(rows_of(tmp_path / "jobs" / name / "results.jsonl")) == 6
    providers = Counter(b["provider"] for b in emu.ledger()["batches"])
    assert providers == {"openai": 4, "anthropic": 1, "gemini": 1}
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    assert run_cli("compare", *names, *jobs).returncode == 0
    assert run_cli("report", *names, *jobs, "-o", str(tmp_path / "r.html")).returncode == 0


def test_a_misspelt_gemini_model_and_a_missing_sdk_are_one_line(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(unknown_models=["gemini-nope"])
    proc = run_cli(*args(emu, tmp_path, fixture_dir, "--smoke", model="gemini-nope"), env=env(emu))
    assert_one_line_error(proc, "'gemini-nope'", emu.url)
    assert emu.ledger()["batches"] == []
    code = (
        "import sys; sys.modules['google.genai'] = None\n"
        "from batchbench.cli import main\n"
        "sys.argv = ['batchbench', *sys.argv[1:]]\n"
        "main()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *args(emu, tmp_path, fixture_dir, "--smoke")],
        capture_output=True, text=True, env={"PATH": "/usr/bin", **env(emu)},
    )  # fmt: skip
    assert_one_line_error(proc, "'google.genai'", "pip install 'batchbench[gemini]'")
    assert not any(Path(tmp_path / "jobs").glob("*/journal.jsonl"))


def test_status_refresh_list_cancel_dry_run_and_export_for_a_gemini_run(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(paused=True)
    argv = args(emu, tmp_path, fixture_dir, "--limit", "6", "--no-wait", cap=3)
    assert run_cli(*argv, env=env(emu)).returncode == 3
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    refresh = run_cli("status", "gemini-3.1-pro", *jobs, "--refresh", env=env(emu))
    live = [line for line in refresh.stdout.splitlines() if line.startswith("live: ")]
    assert refresh.returncode == 0 and len(live) == 2, refresh.stdout
    assert all("JOB_STATE_PENDING 0/? lines" in line for line in live)  # no counts from Gemini
    assert "gemini-3.1-pro" in run_cli("list", *jobs).stdout
    proc = run_cli("cancel", "gemini-3.1-pro", *jobs, env=env(emu))
    assert proc.returncode == 0 and "cancelled 2 batch(es)" in proc.stdout, proc.stderr
    emu.flush()
    assert run_cli(*argv, env=env(emu)).returncode == 3
    status = json.loads(run_cli("status", "gemini-3.1-pro", *jobs, "--json").stdout)
    assert status["status"] == "cancelled" and status["cases"]["pending"] == 6
    assert {b["status"] for b in emu.ledger()["batches"]} == {"CANCELLED"}
    # Priced before anything is paid: gemini-3.1-pro-preview at $2 / $12 per 1M, half in batch.
    base = ["run", "--answer-model", "gemini-3.1-pro", "--judge-model", "gpt-4.1",
            "--dataset", str(fixture_dir), "--jobs-dir", str(tmp_path / "dry")]  # fmt: skip
    answers = json.loads(run_cli(*base, "--dry-run", "--json").stdout)["stages"]["answers"]
    expected = (answers["input_tokens"] * 2 + answers["output_tokens"] * 12) / 1e6 / 2
    assert answers["batch_usd"] == pytest.approx(expected, abs=1e-6)  # shown to 6 places
    proc = run_cli(*base, "--max-cost", "0.01", env={"GEMINI_API_KEY": "", "OPENAI_API_KEY": ""})
    assert_one_line_error(proc, "--max-cost", "nothing was submitted")
    assert not (tmp_path / "dry").exists()

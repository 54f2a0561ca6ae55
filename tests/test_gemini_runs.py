"""What only Gemini runs do: jobs stuck in PENDING, SUCCEEDED before the file, three
providers in one command. The shared contracts are in ``test_providers.py``."""

from __future__ import annotations

import json
from collections import Counter

from support.cli import run_cli
from support.providers import GEMINI as RIG
from support.runs import assert_no_duplicates, normalised, rows_of


def test_a_job_stuck_in_pending_is_cancelled_and_sent_again_once(
    batch_emulator_factory, clock, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(anomalies={"stuck-pending": 1.0})  # every job, every time
    argv = RIG.args(
        emu, tmp_path, fixture_dir, "--limit", "4", "--no-wait", "--resubmit-after", "3600"
    )
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    assert run_cli(*argv, env=RIG.env(emu)).returncode == 3  # a job made; it never starts
    clock.advance(3601)  # an hour later
    proc = run_cli(*argv, env=RIG.env(emu))
    assert proc.returncode == 3 and "has not started 3600s after it was created" in proc.stderr
    for _ in range(4):  # collect the cancelled job, send its requests again, wait
        clock.advance(3601)
        assert run_cli(*argv, env=RIG.env(emu)).returncode == 3
    made = [b for b in emu.ledger()["batches"] if b["provider"] == "gemini"]
    assert [b["status"] for b in made] == ["CANCELLED", "PENDING"]  # once, not again
    status = json.loads(run_cli("status", "gemini-3.1-pro", *jobs, "--json").stdout)
    assert status["stalled"] == 1
    text = run_cli("status", "gemini-3.1-pro", *jobs).stdout
    assert "cancelled and their requests sent again" in text


def test_succeeded_before_its_file_is_waited_out(batch_emulator_factory, tmp_path, fixture_dir):
    good = batch_emulator_factory()
    argv = RIG.args(good, tmp_path / "ref", fixture_dir, "--limit", "8", cap=3)
    assert run_cli(*argv, env=RIG.env(good)).returncode == 0
    emu = batch_emulator_factory(anomalies={"succeeded-before-file": 1.0}, latency=0.2)
    proc = run_cli(*RIG.args(emu, tmp_path, fixture_dir, "--limit", "8", cap=3), env=RIG.env(emu))
    assert proc.returncode == 0, proc.stderr
    expected = normalised(tmp_path / "ref" / "jobs" / "gemini-3.1-pro")
    assert normalised(tmp_path / "jobs" / "gemini-3.1-pro") == expected
    journal = (tmp_path / "jobs" / "gemini-3.1-pro" / "journal.jsonl").read_text()
    assert "responses file not yet named" in journal  # it was seen, and waited out
    assert_no_duplicates(emu)


def test_openai_claude_and_gemini_in_one_command(batch_emulator, tmp_path, fixture_dir):
    emu = batch_emulator
    argv = RIG.args(emu, tmp_path, fixture_dir, "--limit", "6", "--run", "trio")
    at = argv.index("--answer-model")
    argv[at : at + 2] = [
        "--answer-model",
        "ans-model",
        "--answer-model",
        "claude-opus-5",
        "--answer-model",
        "gemini-3-flash-preview",
    ]
    claude = {"ANTHROPIC_API_KEY": "ak", "ANTHROPIC_BASE_URL": emu.url}
    proc = run_cli(*argv, env={**RIG.env(emu), **claude})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = ["trio-ans-model", "trio-claude-opus-5", "trio-gemini-3-flash-preview"]
    for name in names:
        assert len(rows_of(tmp_path / "jobs" / name / "results.jsonl")) == 6
    providers = Counter(b["provider"] for b in emu.ledger()["batches"])
    assert providers == {"openai": 4, "anthropic": 1, "gemini": 1}
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    assert run_cli("compare", *names, *jobs).returncode == 0
    assert run_cli("report", *names, *jobs, "-o", str(tmp_path / "r.html")).returncode == 0


def test_usage_counts_thoughts_as_output(batch_emulator_factory, tmp_path, fixture_dir):
    from batchbench.emulator.model import default_content

    def responder(request):
        if "response_format" in request:
            return default_content(request)
        return RIG.answer(0)  # 9 prompt, 4 candidates and 3 thought tokens

    emu = batch_emulator_factory(responder=responder)
    assert (
        run_cli(*RIG.args(emu, tmp_path, fixture_dir, "--limit", "4"), env=RIG.env(emu)).returncode
        == 0
    )
    status = json.loads(
        run_cli("status", "gemini-3.1-pro", "--jobs-dir", str(tmp_path / "jobs"), "--json").stdout
    )
    usage = status["cost"]["stages"]["answers"]
    assert usage["requests"] == 4 and usage["prompt_tokens"] == 36
    assert usage["completion_tokens"] == 4 * (4 + 3) and usage["reasoning_tokens"] == 12

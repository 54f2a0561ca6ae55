"""What only Claude runs do: expired lines, an OpenAI and a Claude model together, the demo.

The contracts every provider shares (reference rows, kills, status and cancel, prices,
typos, keys, bad days) are in ``test_providers.py``.
"""

from __future__ import annotations

import json
from collections import Counter

from support.cli import run_cli
from support.providers import ANTHROPIC as RIG
from support.runs import assert_no_duplicates, rows_of


def test_a_group_of_an_openai_and_a_claude_model_in_one_command(
    batch_emulator, tmp_path, fixture_dir
):
    emu = batch_emulator
    argv = RIG.args(emu, tmp_path, fixture_dir, "--limit", "6", "--run", "grp")
    at = argv.index("--answer-model")
    argv[at : at + 2] = ["--answer-model", "ans-model", "--answer-model", "claude-sonnet-4-6"]
    proc = run_cli(*argv, env=RIG.env(emu))
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
    refresh = run_cli("status", names[1], *jobs, "--refresh", env=RIG.env(emu))
    assert refresh.returncode == 0 and "no batch in flight" in refresh.stdout


def test_expired_lines_are_sent_again_without_spending_retries(
    batch_emulator_factory, clock, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(latency=36000, completion_window=7200)
    argv = RIG.args(emu, tmp_path, fixture_dir, "--limit", "12", cap=4)
    assert run_cli(*argv, "--no-wait", env=RIG.env(emu)).returncode == 3  # three batches made
    clock.advance(7300)  # each ran one line before its window closed
    emu.tick()  # the service ends them now, before its settings change
    emu.store.settings.latency, emu.store.settings.completion_window = 0.05, 86400
    proc = run_cli(*argv, env=RIG.env(emu))
    assert proc.returncode == 0, proc.stderr
    assert len(rows_of(tmp_path / "jobs" / "opus-5" / "results.jsonl")) == 12
    claude = [b for b in emu.ledger()["batches"] if b["provider"] == "anthropic"]
    assert len(claude) > 3  # expired lines were sent again, in new batches
    assert_no_duplicates(emu)
    status = json.loads(
        run_cli("status", "opus-5", "--jobs-dir", str(tmp_path / "jobs"), "--json").stdout
    )
    assert status["losses"]["answers"] == 9  # expired: sent again, not spending retries


def test_the_demo_grades_a_claude_model_on_the_emulator(tmp_path):
    proc = run_cli("demo", "--answer-model", "claude-sim", "--jobs-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_json = json.loads((tmp_path / "demo" / "run.json").read_text())
    assert run_json["services"]["answers"]["provider"] == "anthropic"
    rows = rows_of(tmp_path / "demo" / "results.jsonl")
    assert rows and all(r["answer"].startswith("Simulated answer (claude-sim)") for r in rows)


def test_status_says_only_how_many_lines_are_processing(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """Anthropic says nothing but "processing N" until a batch has ended."""
    emu = batch_emulator_factory(paused=True)
    argv = RIG.args(emu, tmp_path, fixture_dir, "--limit", "6", "--no-wait", cap=3)
    assert run_cli(*argv, env=RIG.env(emu)).returncode == 3
    text = run_cli("status", "opus-5", "--jobs-dir", str(tmp_path / "jobs")).stdout
    assert "3 of 3 lines still processing" in text and "0/3 lines done" not in text


def test_a_group_with_a_misspelt_model_buys_nothing_and_says_what_was_meant(
    batch_emulator, tmp_path, fixture_dir
):
    """#63.7: `claud-sonnet-4-6` (a typo) is routed to OpenAI, which does not know it: the
    good model's batch was bought before the typo was refused. Every model of the group
    is checked first; the typo stops the command in one line with the routing rule it
    fell under and the nearest known name, and nothing is created for any model."""
    from support.cli import assert_one_line_error

    emu = batch_emulator
    emu.store.settings.unknown_models = ["claud-sonnet-4-6"]
    argv = RIG.args(emu, tmp_path, fixture_dir, "--limit", "6", "--run", "grp")
    at = argv.index("--answer-model")
    argv[at : at + 2] = ["--answer-model", "ans-model", "--answer-model", "claud-sonnet-4-6"]
    proc = run_cli(*argv, env=RIG.env(emu))
    assert_one_line_error(
        proc, "claud-sonnet-4-6", "routed to OpenAI", "did you mean 'claude-sonnet-4-6'?"
    )
    assert not emu.ledger()["batches"] and not emu.ledger()["executions"]

"""What only Fireworks runs do: effort max, jobs of their own for other parameters, four
providers in one command, the account. The shared contracts are in ``test_providers.py``."""

from __future__ import annotations

import json
from collections import Counter

import polars as pl
from support.cli import assert_one_line_error, run_cli
from support.providers import FIREWORKS as RIG
from support.providers import scripted_responder
from support.runs import rows_of

from batchbench.bench.dataset import load_dataset
from batchbench.emulator.model import default_content


def test_effort_max_is_sent_as_max(batch_emulator_factory, tmp_path, fixture_dir):
    seen: list = []
    emu = batch_emulator_factory(responder=lambda b: seen.append(b) or default_content(b))
    argv = RIG.args(
        emu, tmp_path, fixture_dir, "--smoke", "--reasoning-effort", "max", model="kimi-k3"
    )
    assert run_cli(*argv, env=RIG.env(emu)).returncode == 0
    answers = [b for b in seen if "response_format" not in b]
    assert answers and {b["reasoning_effort"] for b in answers} == {"max"}
    assert {b["model"] for b in answers} == {"accounts/fireworks/models/kimi-k3"}
    rows = rows_of(tmp_path / "jobs" / "kimi-k3-smoke" / "results.jsonl")
    assert {r["answer_reasoning_effort"] for r in rows} == {"max"}


def test_requests_with_other_parameters_go_to_jobs_of_their_own(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """A job carries the shared parameters: a request sent again with effort "low", or
    without its refused temperature, goes into a job whose parameters say so."""
    cases = load_dataset(fixture_dir).cases[:4]
    seen: dict = {}
    emu = batch_emulator_factory(
        responder=scripted_responder(RIG, [c["prompt"] for c in cases], seen)
    )
    proc = run_cli(*RIG.args(emu, tmp_path, fixture_dir, "--limit", "4"), env=RIG.env(emu))
    assert proc.returncode == 1, proc.stderr  # case 3 is empty every time
    jobs = [j for j in emu.face("fireworks").made if j.lines]
    params = {j.lines[0]["custom_id"].split("-", 2)[2]: j.parameters for j in jobs[1:]}
    low = params[cases[1]["case_id"]]
    assert json.loads(low["extraBody"]) == {"reasoning_effort": "low"} and "temperature" in low
    assert "temperature" not in params[cases[2]["case_id"]]
    assert all(j.model == RIG.resolved for j in jobs)


def test_four_providers_in_one_command(batch_emulator, tmp_path, fixture_dir):
    emu = batch_emulator
    argv = RIG.args(emu, tmp_path, fixture_dir, "--limit", "6", "--run", "four")
    at = argv.index("--answer-model")
    models = ["ans-model", "claude-opus-5", "gemini-3-flash-preview", "glm-5.3"]
    argv[at : at + 2] = [a for m in models for a in ("--answer-model", m)]
    more = {
        "ANTHROPIC_API_KEY": "ak",
        "ANTHROPIC_BASE_URL": emu.url,
        "GEMINI_API_KEY": "gk",
        "GOOGLE_GEMINI_BASE_URL": emu.url,
    }
    proc = run_cli(*argv, env={**RIG.env(emu), **more})
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
            assert RIG.key.encode() not in path.read_bytes()


def test_without_an_account_a_fireworks_model_is_one_line(batch_emulator, tmp_path, fixture_dir):
    proc = run_cli(
        *RIG.args(batch_emulator, tmp_path, fixture_dir, "--smoke"),
        env={**RIG.env(batch_emulator), "FIREWORKS_ACCOUNT_ID": ""},
    )
    assert_one_line_error(proc, "FIREWORKS_ACCOUNT_ID")
    assert batch_emulator.ledger()["batches"] == []

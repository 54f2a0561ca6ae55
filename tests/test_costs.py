"""Plan before paying (dry run, prices, --max-cost), usage and cost after, token budget."""

from __future__ import annotations

import json
import math

import pytest
from support.cli import assert_one_line_error, run_cli
from support.runs import env, journal, parse_id, run_args


def dry(fixture_dir, *extra, answer="ans-model", judge="judge-model"):
    proc = run_cli(
        "run",
        "--answer-model",
        answer,
        "--judge-model",
        judge,
        "--dataset",
        str(fixture_dir),
        "--dry-run",
        "--json",
        *extra,
        env={"OPENAI_API_KEY": ""},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_dry_run_counts_and_shard_boundaries(fixture_dir, fixture_dataset, tmp_path):
    n = len(fixture_dataset.cases)
    plan = dry(fixture_dir, "--max-requests-per-batch", "7")
    for stage in ("answers", "judges"):
        s = plan["stages"][stage]
        assert s["requests"] == n and s["files"] == math.ceil(n / 7)
        assert s["file_sizes"] == [7] * (n // 7) + ([n % 7] if n % 7 else [])
    benchmarks = {c["benchmark"] for c in fixture_dataset.cases}
    plan = dry(fixture_dir, "--smoke", "--max-requests-per-batch", "3")
    sizes = [3] * (len(benchmarks) // 3) + ([len(benchmarks) % 3] if len(benchmarks) % 3 else [])
    assert plan["stages"]["answers"]["file_sizes"] == sizes
    plan = dry(fixture_dir, "--benchmark", "drug_safety")
    drug_safety = sum(c["benchmark"] == "drug_safety" for c in fixture_dataset.cases)
    assert plan["stages"]["judges"]["file_sizes"] == [drug_safety]
    assert not (tmp_path / "jobs").exists()


def test_dry_run_bytes_equal_the_files_a_run_submits(batch_emulator, fixture_dir, tmp_path):
    plan = dry(fixture_dir, "--limit", "30", "--max-requests-per-batch", "7")
    proc = run_cli(
        *run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "30", cap=7), env=env()
    )
    assert proc.returncode == 0, proc.stderr
    files = sorted((tmp_path / "jobs" / "ans-model" / "requests").glob("answers-*.jsonl"))
    assert [len(f.read_text().splitlines()) for f in files] == [7, 7, 7, 7, 2]
    assert sum(f.stat().st_size for f in files) == plan["stages"]["answers"]["bytes"]


def _pieces(text):
    """Word pieces, counted again by walking the text: a run of letters is one, digits
    one per three in a run, every other character but a space one."""
    count, kind, run = 0, None, 0
    for c in text:
        now = (
            "letter"
            if c.isalpha()
            else "digit"
            if c.isdigit()
            else "space"
            if c.isspace()
            else "symbol"
        )
        run = run + 1 if now == kind else 1
        if now == "symbol" or (now == "letter" and run == 1) or (now == "digit" and run % 3 == 1):
            count += 1
        kind = now
    return count


def _estimate(body):
    """The documented estimate, written out again: 3 + per message 3 + the larger of
    ceil(chars / 4) and the message's word pieces."""
    return 3 + sum(
        3 + max(math.ceil(len(m["content"]) / 4), _pieces(m["content"])) for m in body["messages"]
    )


def test_cost_arithmetic_by_hand(fixture_dir, tmp_path, batch_emulator):
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps(
            {
                "batch_discount": 0.5,
                "models": {
                    "ans-model": {"input": 1.0, "cached_input": 0.5, "output": 2.0},
                    "judge-model": {"input": 3.0, "output": 4.0},
                },
            }
        )
    )
    plan = dry(
        fixture_dir, "--limit", "12", "--pricing", str(prices), "--assumed-answer-tokens", "100"
    )
    # Rebuild the answer requests a run submits and count their tokens by hand.
    proc = run_cli(*run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "12"), env=env())
    assert proc.returncode == 0
    bodies = [
        json.loads(x)["body"]
        for f in sorted((tmp_path / "jobs" / "ans-model" / "requests").glob("answers-*.jsonl"))
        for x in f.read_text().splitlines()
    ]
    answers = plan["stages"]["answers"]
    assert answers["tokenizer"].startswith("estimate")
    assert answers["input_tokens"] == sum(_estimate(b) for b in bodies)
    assert answers["output_tokens"] == 12 * 100
    sync = (answers["input_tokens"] * 1.0 + answers["output_tokens"] * 2.0) / 1e6
    assert answers["sync_usd"] == round(sync, 6)
    assert answers["batch_usd"] == round(sync / 2, 6)
    judges = plan["stages"]["judges"]
    judge_sync = (judges["input_tokens"] * 3.0 + judges["output_tokens"] * 4.0) / 1e6
    assert judges["batch_usd"] == round(judge_sync / 2, 6)
    assert plan["total"]["batch_usd"] == round(answers["batch_usd"] + judges["batch_usd"], 6)


def test_real_tokenizer_when_available_offline(fixture_dir):
    plan = dry(fixture_dir, "--smoke", answer="gpt-4o-mini", judge="gpt-4.1")
    answers = plan["stages"]["answers"]
    assert answers["tokenizer"].endswith("o200k_base")
    assert answers["priced"] and answers["batch_usd"] > 0
    estimate = dry(fixture_dir, "--smoke")["stages"]["answers"]
    assert answers["input_tokens"] != estimate["input_tokens"]


def test_max_cost_refuses_before_any_call(batch_emulator, fixture_dir, tmp_path):
    args = run_args(batch_emulator, tmp_path, fixture_dir, "--smoke")
    args[args.index("--answer-model") + 1] = "gpt-4o"
    args[args.index("judge-model")] = "gpt-4.1"
    proc = run_cli(*args, "--max-cost", "0.0001", env=env())
    assert_one_line_error(proc, "exceeds --max-cost $0.0001", "nothing was submitted")
    proc = run_cli(
        *run_args(batch_emulator, tmp_path, fixture_dir, "--smoke"), "--max-cost", "5", env=env()
    )
    assert_one_line_error(proc, "no price for 'ans-model'", "--pricing")
    assert batch_emulator.ledger()["batches"] == []
    assert not (tmp_path / "jobs").exists()
    proc = run_cli(*args, "--max-cost", "100", env=env())
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ({"models": {"m": {"input": "cheap"}}}, "models.m"),
        (
            {"models": {}, "batch_discounts": {"groq": {"discount": 2}}},
            "batch_discounts.groq.discount",
        ),
    ],
)
def test_bad_pricing_file(fixture_dir, tmp_path, content, field):
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps(content))
    proc = run_cli(
        "run",
        "--answer-model",
        "m",
        "--judge-model",
        "m",
        "--dataset",
        str(fixture_dir),
        "--dry-run",
        "--pricing",
        str(bad),
    )
    assert_one_line_error(proc, "p.json", field)


def test_usage_totals_and_cost_after_a_run(batch_emulator, fixture_dir, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps(
            {
                "models": {
                    "ans-model": {"input": 1, "output": 2},
                    "judge-model": {"input": 1, "output": 2},
                }
            }
        )
    )
    proc = run_cli(
        *run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "20"),
        "--pricing",
        str(prices),
        env=env(),
    )
    assert proc.returncode == 0, proc.stderr
    run_dir = tmp_path / "jobs" / "ans-model"
    expected = {"answers": [0, 0, 0], "judges": [0, 0, 0]}
    for path in (run_dir / "raw").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            usage = rec["response"]["body"]["usage"]
            stage = parse_id(rec["custom_id"]).stage
            expected[stage][0] += 1
            expected[stage][1] += usage["prompt_tokens"]
            expected[stage][2] += usage["completion_tokens"]
    status = json.loads(
        run_cli(
            "status",
            "ans-model",
            "--jobs-dir",
            str(tmp_path / "jobs"),
            "--json",
            "--pricing",
            str(prices),
        ).stdout
    )
    report = json.loads((run_dir / "report.json").read_text())
    for stage, (requests, prompt, completion) in expected.items():
        for got in (status["cost"]["stages"][stage], report["cost"]["stages"][stage]):
            assert got["requests"] == requests == 20
            assert got["prompt_tokens"] == prompt and got["completion_tokens"] == completion
            assert got["sync_usd"] == round((prompt + 2 * completion) / 1e6, 6)
            assert got["batch_usd"] == round((prompt + 2 * completion) / 2e6, 6)
    text = run_cli(
        "status", "ans-model", "--jobs-dir", str(tmp_path / "jobs"), "--pricing", str(prices)
    ).stdout
    assert "answers usage: 20 requests" in text and "total cost $" in text
    text = run_cli("status", "ans-model", "--jobs-dir", str(tmp_path / "jobs")).stdout
    assert "no price for ans-model" in text and "total cost" not in text
    summary = json.loads((run_dir / "results.summary.json").read_text())
    assert "cost" not in summary and "usage" not in summary


def test_enqueued_token_budget_releases_files_within_it(
    batch_emulator_factory, fixture_dir, tmp_path
):
    budget = 9000
    emu = batch_emulator_factory(latency=0.3, enqueued_token_limit=budget)
    proc = run_cli(
        *run_args(emu, tmp_path, fixture_dir, "--limit", "50", cap=10),
        "--max-enqueued-tokens",
        str(budget),
        env=env(),
    )
    assert proc.returncode == 0, proc.stderr
    assert all(b["status"] == "completed" for b in emu.ledger()["batches"])
    events = journal(tmp_path / "jobs" / "ans-model")
    tokens, stage_of, flying, peak, overlap = {}, {}, set(), 0, False
    for e in events:
        if e["ev"] == "plan":
            tokens[e["sub"]], stage_of[e["sub"]] = e["tokens"], e["stage"]
            assert e["tokens"] <= budget
        elif e["ev"] == "created":
            flying.add(e["sub"])
            for stage in ("answers", "judges"):
                load = sum(tokens[s] for s in flying if stage_of[s] == stage)
                assert load <= budget, (e, load)
                peak = max(peak, load)
            overlap = overlap or len(flying) > 1
        elif e["ev"] == "batch" and e["status"] in ("completed", "failed", "expired", "cancelled"):
            flying.discard(e["sub"])
    assert overlap and peak > budget / 2  # files were released together, up to the budget


def test_each_venue_has_its_own_discount_with_its_source(fixture_dir, tmp_path):
    """Groq's documented batch discount is 25 % (console.groq.com/docs/batch), OpenAI's
    50 % (its Batch API FAQ), Together's only on selected models: a price file of prices
    alone keeps each venue's own, and the dry run says which and where it was read."""
    prices = tmp_path / "prices.json"
    models = {
        "groq/openai/gpt-oss-120b": {"input": 1.0, "output": 2.0},
        "together/openai/gpt-oss-120b": {"input": 1.0, "output": 2.0},
        "judge-model": {"input": 3.0, "output": 4.0},
    }
    prices.write_text(json.dumps({"models": models}))
    plan = dry(fixture_dir, "--smoke", "--pricing", str(prices), answer="groq/openai/gpt-oss-120b")
    answers, judges = plan["stages"]["answers"], plan["stages"]["judges"]
    sync = (answers["input_tokens"] * 1.0 + answers["output_tokens"] * 2.0) / 1e6
    assert answers["batch_usd"] == round(sync * 0.75, 6)
    assert "25%" in answers["discount_source"]
    assert "console.groq.com/docs/batch" in answers["discount_source"]
    judge_sync = (judges["input_tokens"] * 3.0 + judges["output_tokens"] * 4.0) / 1e6
    assert judges["batch_usd"] == round(judge_sync * 0.5, 6)
    assert "help.openai.com" in judges["discount_source"]
    together = dry(
        fixture_dir, "--smoke", "--pricing", str(prices), answer="together/openai/gpt-oss-120b"
    )["stages"]["answers"]
    assert together["batch_usd"] == together["sync_usd"]  # no discount assumed
    assert "selected models" in together["discount_source"]
    # A model the user knows to be discounted there, named in their own table.
    venues = {"together": {"discount": 0.0, "models": {"together/openai/gpt-oss-120b": 0.5}}}
    prices.write_text(json.dumps({"models": models, "batch_discounts": venues}))
    together = dry(
        fixture_dir, "--smoke", "--pricing", str(prices), answer="together/openai/gpt-oss-120b"
    )["stages"]["answers"]
    assert together["batch_usd"] == round(together["sync_usd"] / 2, 6)
    # One batch_discount in a file is the user's figure for every venue.
    prices.write_text(json.dumps({"models": models, "batch_discount": 0.4}))
    groq = dry(fixture_dir, "--smoke", "--pricing", str(prices), answer="groq/openai/gpt-oss-120b")[
        "stages"
    ]["answers"]
    assert groq["batch_usd"] == round(groq["sync_usd"] * 0.6, 6)
    assert "prices.json" in groq["discount_source"]

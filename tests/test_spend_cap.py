"""#67.1: ``--max-spend``, a hard cap on what a run is billed, held before every billable
call. The expected dollars are worked out here from the price table (output only, at
$1 per million tokens, so a request's worst case is its output allowance), and what
was bought is the emulator's own record of the batches it made and the lines it ran."""

from __future__ import annotations

import json

import pytest
from support.cli import assert_one_line_error, run_cli
from support.runs import assert_no_duplicates, env, run_args

from batchbench._failpoints import Crash

# A batch's worst case: each request's whole output allowance (the protocol's
# max_completion_tokens: 32,000 an answer, 5,000 a judgement) at the batch price.
PER_ANSWER = 32_000 * 1.0 / 1e6 * 0.5  # $0.016
PER_JUDGEMENT = 5_000 * 1.0 / 1e6 * 0.5


def _prices(tmp_path):
    table = tmp_path / "prices.json"
    models = {m: {"input": 0.0, "output": 1.0} for m in ("ans-model", "judge-model")}
    table.write_text(json.dumps({"batch_discount": 0.5, "models": models}))
    return ["--pricing", str(table)]


def _made(emu):
    return [b for b in emu.ledger()["batches"] if b["provider"] == "openai"]


def test_a_batch_that_could_cross_the_cap_is_not_bought(batch_emulator, tmp_path, fixture_dir):
    emu = batch_emulator
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "4", *_prices(tmp_path), cap=2)
    # two answer batches of 2: each could cost 2 x $0.016; the cap holds one, and the
    # second is refused while the first is in flight (committed at its worst)
    cap = 3 * PER_ANSWER
    proc = run_cli(*args, "--max-spend", str(cap), env=env())
    assert proc.returncode == 6, proc.stderr
    assert_one_line_error(proc, "--max-spend $0.0480", "committed $0.0320", "could cost $0.0320")
    assert len(_made(emu)) == 1  # the emulator made one batch, not two
    # raised: the run goes on from there, nothing bought twice, every case scored
    proc = run_cli(*args, "--max-spend", "5", env=env())
    assert proc.returncode == 0, proc.stderr
    assert_no_duplicates(emu)
    rows = (tmp_path / "jobs" / "ans-model" / "results.jsonl").read_text().splitlines()
    assert len(rows) == 4


def test_a_cap_below_the_first_batch_buys_nothing(batch_emulator, tmp_path, fixture_dir):
    emu = batch_emulator
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "4", *_prices(tmp_path), cap=40)
    proc = run_cli(*args, "--max-spend", str(4 * PER_ANSWER * 0.99), env=env())
    assert proc.returncode == 6, proc.stderr
    assert "spent $0.0000" in proc.stderr and "4 planned requests left unbought" in proc.stderr
    assert _made(emu) == [] and emu.ledger()["executions"] == []


def test_an_unpriced_model_cannot_be_capped(batch_emulator, tmp_path, fixture_dir):
    args = run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "2")
    proc = run_cli(*args, "--max-spend", "1", env=env())
    assert_one_line_error(proc, "--max-spend", "ans-model", "has no price", "--pricing")
    assert _made(batch_emulator) == []


def test_a_create_killed_mid_call_still_counts_against_the_cap(
    batch_emulator, tmp_path, fixture_dir, monkeypatch
):
    """Killed after the first create reached the service but before its answer was
    journaled: the next invocation counts that batch as committed (its outcome unknown,
    at its worst), finds and adopts it, and buys no second one past the cap."""
    emu = batch_emulator
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "4", *_prices(tmp_path), cap=2)
    capped = [*args, "--max-spend", str(3 * PER_ANSWER)]
    monkeypatch.setenv("BATCHBENCH_FAILPOINT", "created:1:raise")
    with pytest.raises(Crash):
        run_cli(*capped, env=env())
    monkeypatch.delenv("BATCHBENCH_FAILPOINT")
    assert len(_made(emu)) == 1  # the create landed; the journal holds no outcome of it
    proc = run_cli(*capped, env=env())
    assert proc.returncode == 6, proc.stderr
    assert len(_made(emu)) == 1 and "committed $0.0320" in proc.stderr
    assert run_cli(*args, "--max-spend", "5", env=env()).returncode == 0
    assert_no_duplicates(emu)


def _priced(tmp_path, *models):
    table = tmp_path / "prices.json"
    priced = {m: {"input": 0.0, "output": 1.0} for m in ("judge-model", *models)}
    table.write_text(json.dumps({"batch_discount": 0.5, "models": priced}))
    return ["--pricing", str(table)]


def test_a_cap_over_the_group_holds_its_runs_together(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """Two answer models in one command, one cap over both: the first run's batch is
    bought, the second run's (as large) would cross the cap while the first is in flight,
    and is not; each run alone would have fitted."""
    emu = batch_emulator_factory(models=["ans-two"])
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "2", cap=40)
    args += [*_priced(tmp_path, "ans-model", "ans-two"), "--answer-model", "ans-two"]
    args[args.index("--run") : args.index("--run") + 2] = []
    cap = ["--max-spend", str(3 * PER_ANSWER)]  # one batch of 2 answers: $0.032
    proc = run_cli(*args, *cap, env=env())
    assert proc.returncode == 0, proc.stderr  # each run alone fits
    emu2 = batch_emulator_factory(models=["ans-two"])
    again = run_args(emu2, tmp_path / "g", fixture_dir, "--limit", "2", cap=40)
    again += [*_priced(tmp_path, "ans-model", "ans-two"), "--answer-model", "ans-two"]
    again[again.index("--run") : again.index("--run") + 2] = []
    proc = run_cli(*again, *cap, "--max-spend-over", "group", env=env())
    assert proc.returncode != 0 and "--max-spend $0.0480" in proc.stdout + proc.stderr
    runs = {b["metadata"]["batchbench_run_id"] for b in _made(emu2)}
    assert len(runs) == 1  # one run's batches; the other's would have crossed the cap


def test_a_cap_over_the_jobs_folder_counts_what_its_runs_spent(
    batch_emulator, tmp_path, fixture_dir
):
    """A team's folder: a finished run's billed replies count against a new run's cap."""
    emu = batch_emulator
    prices = _priced(tmp_path, "ans-model", "ans-two")
    first = run_args(emu, tmp_path, fixture_dir, "--limit", "2", *prices, cap=40)
    assert run_cli(*first, env=env()).returncode == 0
    stages = json.loads(
        run_cli("status", "ans-model", "--jobs-dir", str(tmp_path / "jobs"), "--json").stdout
    )["cost"]["stages"]
    spent = sum(s["completion_tokens"] for s in stages.values()) * 1.0 / 1e6 * 0.5
    assert spent > 0
    second = [*first, "--max-spend-over", "jobs-folder"]
    second[second.index("--run") + 1] = "second"
    made = len(_made(emu))
    # the new run's answer batch ($0.032 at worst) fits a cap of its own, not with the
    # first run's spending beside it
    cap = str(2 * PER_ANSWER + spent / 2)
    proc = run_cli(*second, "--max-spend", cap, env=env())
    assert proc.returncode == 6, proc.stderr
    assert len(_made(emu)) == made


def test_the_dry_run_says_each_stages_worst_case(tmp_path):
    """What --max-spend counts, before anything is bought: each stage's input and every
    request's whole output allowance, at the batch price — worked out here from the price
    table and the plan's own token counts."""
    from support.cli import SAMPLE

    table = tmp_path / "input-priced.json"
    priced = {m: {"input": 2.0, "output": 1.0} for m in ("ans-model", "judge-model")}
    table.write_text(json.dumps({"batch_discount": 0.5, "models": priced}))
    prices = ["--pricing", str(table)]
    argv = ["run", "--answer-model", "ans-model", "--judge-model", "judge-model"]
    argv += ["--dataset", str(SAMPLE), *prices, "--dry-run", "--json"]
    proc = run_cli(*argv, "--jobs-dir", str(tmp_path / "jobs"))
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    for stage, allowance in (("answers", 32_000), ("judges", 5_000)):
        s = plan["stages"][stage]
        expected = (s["input_tokens"] * 2.0 + s["requests"] * allowance * 1.0) / 1e6 * 0.5
        assert s["worst_usd"] == round(expected, 6)
    text = run_cli(*argv[:-1], "--jobs-dir", str(tmp_path / "jobs")).stdout
    total = sum(plan["stages"][s]["worst_usd"] for s in ("answers", "judges"))
    assert f"at worst ${total:,.4f}" in text


def test_the_dry_run_says_what_caching_can_save(tmp_path):
    """#67.2's first part: the judges' requests share the system message and the
    template's head — counted here with bpe-openai's o200k_base directly — under
    the 1,024 tokens a cache starts at, so nothing is saved at one pass; with three
    passes, the repeats are whole prompts seen before."""
    bpe_openai = pytest.importorskip("bpe_openai")
    from support.cli import SAMPLE

    from batchbench.bench.protocol import JUDGE_SYSTEM_MESSAGE

    argv = ["run", "--answer-model", "gpt-4.1-mini", "--judge-model", "gpt-4.1"]
    argv += ["--dataset", str(SAMPLE), "--dry-run", "--json", "--jobs-dir", str(tmp_path)]
    plan = json.loads(run_cli(*argv).stdout)
    judges = plan["stages"]["judges"]["caching"]
    head = JUDGE_SYSTEM_MESSAGE + "\nCLINICAL PROMPT:\n"
    enc = bpe_openai.get_encoding("o200k_base")
    assert abs(judges["shared_prefix_tokens"] - len(enc.encode_ordinary(head))) <= 3
    assert judges["shared_prefix_tokens"] < 1024 and judges["cacheable_share"] == 0
    three = json.loads(run_cli(*argv, "--judge-passes", "3").stdout)
    assert three["stages"]["judges"]["caching"]["repeats_cacheable"] is True


def test_the_cap_comes_from_the_project_file_as_a_number(batch_emulator, tmp_path, fixture_dir):
    """`max-spend = 0.02` in batchbench.toml holds as --max-spend does; a value that is not
    a number of dollars is one line naming the file and the key."""
    emu = batch_emulator
    project = tmp_path / "batchbench.toml"
    project.write_text(f"max-spend = {4 * PER_ANSWER * 0.99}\n")
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "4", *_prices(tmp_path), cap=40)
    proc = run_cli(*args, env={**env(), "BATCHBENCH_PROJECT_FILE": str(project)})
    assert proc.returncode == 6, proc.stderr
    assert _made(emu) == []
    for bad, said in (('"lots"', "not 'lots'"), ("-1", "at least 0")):
        project.write_text(f"max-spend = {bad}\n")
        proc = run_cli(*args, env={**env(), "BATCHBENCH_PROJECT_FILE": str(project)})
        assert_one_line_error(proc, str(project), "max-spend", said)

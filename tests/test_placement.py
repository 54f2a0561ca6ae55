"""#67.3: one model offered by several services, placed where the deadline is met
cheapest, when the user allows it (``run --place-among``).

The witnesses: the emulator's ledger (which service ran the answers, each once), the
run's own ``run.json``, and the rule of choice written out here in plain cases.
"""

from __future__ import annotations

import json

from support.cli import assert_one_line_error, run_cli
from support.providers import RIGS
from support.runs import assert_no_duplicates

from batchbench.placement import Seen, choose

CHEAP, DEAR = {"input": 1.0, "output": 5.0}, {"input": 3.0, "output": 15.0}


def _seen(model: str, chance: float, usd: float | None) -> Seen:
    return Seen(model, model.split("/")[0], chance, usd, "test")


def test_the_cheapest_of_those_likely_enough_is_chosen_else_the_likeliest():
    a, b, c = _seen("a", 0.995, 3.0), _seen("b/m", 0.999, 1.0), _seen("c/m", 0.5, 0.1)
    assert choose([a, b, c]) is b  # both sure: the cheaper; the cheapest of all is not sure
    assert choose([a, _seen("d/m", 0.991, 3.0)]) is a  # a tie: the first named
    assert choose([_seen("e", 0.99, None), a]) is a  # a known price before an unknown
    low, lower = _seen("f", 0.9, 5.0), _seen("g/m", 0.6, 1.0)
    assert choose([lower, low]) is low  # none sure: the likeliest, whatever it costs
    assert choose([_seen("h", 0.9, 5.0), _seen("i/m", 0.9, 2.0)]).model == "i/m"


def _args(emu, tmp_path, fixture_dir, deadline: str) -> tuple[list[str], dict, str]:
    """Claude on Anthropic, placeable on Bedrock; priced by this file's table, in which
    Bedrock's id is the cheaper; judges on OpenAI."""
    anthropic, bedrock = RIGS["anthropic"], RIGS["bedrock"]
    table = tmp_path / "prices.json"
    prices = {anthropic.model: DEAR, bedrock.model: CHEAP, "judge-model": DEAR}
    table.write_text(json.dumps({"batch_discount": 0.5, "models": prices}))
    args = anthropic.args(emu, tmp_path, fixture_dir, "--limit", "4", "--pricing", str(table))
    args += ["--deadline", deadline, "--place-among", bedrock.model]
    return args, {**bedrock.env(emu), **anthropic.env(emu)}, bedrock.model


def test_a_run_goes_where_the_deadline_is_met_cheapest_and_stays_there(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """A deadline both services meet (the forecast's priors, no history yet): the answers
    go to Bedrock, the cheaper; the run keeps the first model's name and holds Bedrock's
    model; the same command again (a cron tick) finds it there and buys nothing twice."""
    anthropic = RIGS["anthropic"]
    emu = batch_emulator_factory(models=[anthropic.resolved, RIGS["bedrock"].resolved])
    args, environment, bedrock = _args(emu, tmp_path, fixture_dir, "+30h")
    proc = run_cli(*args, env=environment)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"answers on {bedrock} (the cheapest" in proc.stderr
    ran = emu.ledger()["executions"]
    assert [e for e in ran if e["provider"] == "bedrock"] and not [
        e for e in ran if e["provider"] == "anthropic"
    ]
    run_dir = tmp_path / "jobs" / anthropic.name()
    assert json.loads((run_dir / "run.json").read_text())["answer_model"] == bedrock
    again = run_cli(*args, env=environment)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "placed:" not in again.stderr
    assert len(emu.ledger()["executions"]) == len(ran)
    assert_no_duplicates(emu)


def test_place_among_goes_with_a_deadline_and_one_answer_model(tmp_path, fixture_dir):
    argv = ["run", "--answer-model", "m", "--judge-model", "j", "--dataset", str(fixture_dir)]
    argv += ["--jobs-dir", str(tmp_path), "--place-among", "bedrock/m"]
    assert_one_line_error(run_cli(*argv), "--place-among goes with --deadline")
    proc = run_cli(*argv, "--deadline", "+3h", "--answer-model", "n")
    assert_one_line_error(proc, "--place-among goes with one --answer-model")

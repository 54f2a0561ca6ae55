"""#67.2: K judge passes laid out so that caching pays where it can — on OpenAI a case's
K identical requests in one batch, side by side; on Anthropic each pass its own batch
(never K cold copies in one Message Batch).

The witnesses: the batches' input files as the openai SDK downloads them from the
emulator (what the service was given, in its order), the emulator's ledger (each request
executed once), the raw replies kept verbatim, and the plain reference's score of each
pass row's decisions.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from itertools import groupby

import openai
import pytest
from support import reference
from support.cli import run_cli
from support.providers import RIGS
from support.runs import KEY, assert_no_duplicates, env, parse_id, rows_of, run_args

from batchbench._failpoints import Crash
from batchbench.bench.dataset import load_dataset

CASES, PASSES = 6, 3


def _varying_judge(fail_first: bool = False):
    """A judge whose verdicts differ each time it sees the same request (the nth time:
    md5 of item and n), so each pass's reply is its own; with ``fail_first``, the first
    judge request it sees is answered 500 (retried)."""
    seen: Counter[str] = Counter()

    def responder(given: dict):
        text = json.dumps(given, sort_keys=True)
        ids = re.findall(r"\[([^\]\\]+)\] points=", text)
        if not ids:
            return "an answer"
        n = seen[text]
        seen[text] += 1
        if fail_first and sum(seen.values()) == 1:
            return {"status_code": 500, "body": {"error": {"message": "boom", "type": "server"}}}
        decisions = [
            {"item_id": i, "matched": hashlib.md5(f"{i}/{n}".encode()).hexdigest()[0] < "8"}
            for i in ids
        ]
        return json.dumps({"decisions": decisions})

    return responder


def _judge_files(emu) -> list[list[dict]]:
    """Each judges batch's input lines, as the service holds them (downloaded with the
    openai SDK), in their order."""
    client = openai.OpenAI(api_key=KEY, base_url=emu.base_url, max_retries=0)
    found = []
    for batch in emu.ledger()["batches"]:
        if batch["provider"] != "openai":
            continue
        text = client.files.content(batch["input_file_id"]).text
        lines = [json.loads(x) for x in text.splitlines() if x.strip()]
        if lines and lines[0]["body"]["model"] == "judge-model":
            found.append(lines)
    return found


def _check_pass_rows(run, fixture_dir) -> None:
    """Every (case, pass) row once, each the decisions its own raw reply gave, scored as
    the plain reference scores them; the results keep pass 1."""
    cases = {c["case_id"]: c for c in load_dataset(fixture_dir).cases}
    replies: dict[tuple[str, int], list] = {}
    for path in (run / "raw").glob("*.jsonl"):
        for line in map(json.loads, path.read_text().splitlines()):
            request = parse_id(line["custom_id"])
            body = (line.get("response") or {}).get("body") or {}
            if request.stage == "judges" and line["response"]["status_code"] == 200:
                decided = json.loads(body["choices"][0]["message"]["content"])["decisions"]
                replies[(request.case_id, request.judge_pass)] = decided
    rows = rows_of(run / "judge_passes.jsonl")
    by_key = {(r["case_id"], r["pass"]): r for r in rows}
    assert len(by_key) == CASES * PASSES
    for (case_id, p), row in by_key.items():
        assert [(d["item_id"], d["matched"]) for d in row["decisions"]] == [
            (d["item_id"], d["matched"]) for d in replies[(case_id, p)]
        ]
        matched = {d["item_id"] for d in row["decisions"] if d["matched"]}
        assert row["score"] == reference.score_case(cases[case_id], matched)[0]
    for row in rows_of(run / "results.jsonl"):
        assert row["decisions"] == by_key[(row["case_id"], 1)]["decisions"]


def test_on_openai_a_cases_passes_go_in_one_batch_side_by_side(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(responder=_varying_judge())
    args = run_args(emu, tmp_path, fixture_dir, "--limit", str(CASES), "--judge-passes", "3")
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [lines] = _judge_files(emu)  # one judges batch, not one a pass
    assert len(lines) == CASES * PASSES
    bodies = [json.dumps(line["body"], sort_keys=True) for line in lines]
    runs = [len(list(group)) for _, group in groupby(bodies)]
    assert runs == [PASSES] * CASES  # each request K times, side by side, then the next
    assert len(set(bodies)) == CASES
    assert_no_duplicates(emu)
    ran = Counter(e["custom_id"] for e in emu.ledger()["executions"])
    assert set(ran.values()) == {1}
    _check_pass_rows(tmp_path / "jobs" / "ans-model", fixture_dir)
    dry = json.loads(run_cli(*args, "--dry-run", "--json").stdout)
    assert "side by side in one batch" in dry["stages"]["judges"]["caching"]["note"]


def test_on_anthropic_each_pass_is_its_own_batch(batch_emulator_factory, tmp_path, fixture_dir):
    """Never K cold copies in one Message Batch: K batches, each case once in each."""
    rig = RIGS["anthropic"]
    emu = batch_emulator_factory()
    argv = rig.args(emu, tmp_path, fixture_dir, "--limit", str(CASES), "--judge-passes", "3")
    argv[argv.index("--answer-model") + 1] = "ans-model"
    argv[argv.index("--judge-model") + 1] = rig.model
    proc = run_cli(*argv, env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    judges = [b for b in emu.ledger()["batches"] if b["provider"] == "anthropic"]
    assert len(judges) == PASSES
    for batch in judges:
        named = [parse_id(cid).case_id for cid in batch["custom_ids"]]
        assert len(named) == len(set(named)) == CASES
    assert_no_duplicates(emu)


def test_a_failed_line_of_a_packed_batch_is_sent_again_alone(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """The first judge request run is answered 500: that one line is sent again (a new
    attempt, its own batch), the others are kept; every (case, pass) row comes from its
    own reply."""
    emu = batch_emulator_factory(responder=_varying_judge(fail_first=True))
    args = run_args(emu, tmp_path, fixture_dir, "--limit", str(CASES), "--judge-passes", "3")
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = _judge_files(emu)
    assert [len(lines) for lines in files] == [CASES * PASSES, 1]  # the packed one, the retry
    assert_no_duplicates(emu)
    _check_pass_rows(tmp_path / "jobs" / "ans-model", fixture_dir)


def test_a_kill_after_a_packed_batchs_rows_pays_nothing_twice(
    batch_emulator_factory, tmp_path, fixture_dir, monkeypatch
):
    """Killed after every pass's rows of the packed batch were written and before the
    journal said so: the same command again writes no row twice that counts, buys
    nothing again, and ends with every (case, pass) row its own reply's."""
    emu = batch_emulator_factory(responder=_varying_judge())
    args = run_args(emu, tmp_path, fixture_dir, "--limit", str(CASES), "--judge-passes", "3")
    monkeypatch.setenv("BATCHBENCH_FAILPOINT", "rows_written:2:raise")  # answers', then judges'
    with pytest.raises(Crash):
        run_cli(*args, env=env())
    monkeypatch.delenv("BATCHBENCH_FAILPOINT")
    executed = len(emu.ledger()["executions"])
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(emu.ledger()["executions"]) == executed  # nothing bought again
    run = tmp_path / "jobs" / "ans-model"
    assert Counter(r["case_id"] for r in rows_of(run / "results.jsonl")) == dict.fromkeys(
        [c["case_id"] for c in load_dataset(fixture_dir).cases[:CASES]], 1
    )
    _check_pass_rows(run, fixture_dir)
    assert_no_duplicates(emu)

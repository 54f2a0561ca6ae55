"""The reference runner's behaviour on the edges (reference-behaviour.md, section 8).

Each test drives `batchbench run` as a subprocess against the loopback emulator,
with a responder that produces the edge, and checks the rows the reference
would have written. Expected texts are built from the spec's formulas (and
Python's own exception texts, which the reference prints), never read back from
batchbench.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from support.cli import run_cli
from support.runs import ERROR_KEYS, KEY, assert_no_duplicates, parse_id

ANSWER_MODEL, JUDGE_MODEL = "ans-model", "judge-model"


def args(emu, jobs: Path, dataset: Path, *extra: str) -> list[str]:
    return [
        "run",
        "--answer-model",
        ANSWER_MODEL,
        "--judge-model",
        JUDGE_MODEL,
        "--jobs-dir",
        str(jobs),
        "--dataset",
        str(dataset),
        "--base-url",
        emu.base_url,
        "--poll-interval",
        "0.05",
        *extra,
    ]


def run(emu, tmp_path: Path, dataset: Path, *extra: str):
    env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": ""}
    return run_cli(*args(emu, tmp_path / "jobs", dataset, *extra), env=env)


class Script:
    """A responder that knows which case a request is for, and counts calls."""

    def __init__(self, cases: list[dict]):
        self.cases = cases
        self.calls: Counter[tuple[str, str]] = Counter()
        self.by_prompt = {c["prompt"]: c for c in cases}

    def case_of(self, body: dict) -> tuple[str, dict]:
        user = body["messages"][-1]["content"]
        if body["model"] == JUDGE_MODEL:
            found = re.search(r"^\[([^\]]+)\] points=", user, re.M)
            assert found is not None, user
            first_id = found.group(1)
            case = next(c for c in self.cases if c["rubric_items"][0]["item_id"] == first_id)
            return "judge", case
        return "answer", self.by_prompt[user]

    def all_matched(self, case: dict) -> str:
        return json.dumps(
            {
                "decisions": [
                    {"item_id": i["item_id"], "matched": True} for i in case["rubric_items"]
                ]
            }
        )

    def __call__(self, body: dict):
        stage, case = self.case_of(body)
        self.calls[stage, case["case_id"]] += 1
        return self.reply(stage, case, self.calls[stage, case["case_id"]], body)

    def reply(self, stage: str, case: dict, n: int, body: dict):
        return self.all_matched(case) if stage == "judge" else "An answer."


def selected(fixture_dataset, n: int) -> list[dict]:
    return fixture_dataset.cases[:n]


def executions(emu, stage: str, case_id: str) -> list[dict]:
    """The case's executed requests of a stage ("answer" or "judge"), every attempt."""
    found = []
    for e in emu.ledger()["executions"]:
        request = parse_id(e["custom_id"])
        if request.stage == stage + "s" and request.case_id == case_id:
            found.append(e)
    return found


def test_separators_in_answers_resume_and_failed_cases_are_redone(
    batch_emulator_factory, tmp_path, fixture_dir, fixture_dataset
):
    cases = selected(fixture_dataset, 6)
    weird = "line one\u2028line two\u2029line three\u0085end"
    judge_fails, answer_fails = cases[1]["case_id"], cases[4]["case_id"]

    class Edges(Script):
        def reply(self, stage, case, n, body):
            if stage == "answer" and case["case_id"] == answer_fails and n == 1:
                return {"status_code": 404, "body": {"error": {"message": "gone"}}}
            if stage == "judge" and case["case_id"] == judge_fails and n == 1:
                return '{"decisions": [tru'
            return weird if stage == "answer" else self.all_matched(case)

    emu = batch_emulator_factory(latency=0.05, responder=Edges(cases))
    first = run(emu, tmp_path, fixture_dir, "--limit", "6", "--max-attempts", "1")
    assert first.returncode == 1, first.stderr
    run_dir = tmp_path / "jobs" / ANSWER_MODEL
    rows = rows_of_bytes(run_dir / "results.jsonl")
    errors = {r["case_id"]: r["error"] for r in rows if "error" in r}
    assert errors == {
        judge_fails: "ValueError: invalid judge JSON: Expecting value: line 1 column 16 (char 15)",
        answer_fails: "RuntimeError: HTTP 404: " + json.dumps({"error": {"message": "gone"}}),
    }
    assert all(r["answer"] == weird for r in rows if "score" in r)

    # With --no-wait (cron) it only resumes: nothing is redone, nothing paid.
    count = len(emu.ledger()["executions"])
    resumed = run(emu, tmp_path, fixture_dir, "--limit", "6", "--max-attempts", "1", "--no-wait")
    assert resumed.returncode == 0 and len(emu.ledger()["executions"]) == count
    said = [x for x in resumed.stdout.splitlines() if not x.startswith(("NEW", "RESUMING"))]
    assert len(said) == 1 and "is complete" in said[0] and "without --no-wait" in said[0]

    # The same command again: only the two failed cases are redone, from the
    # stage that failed, and nothing done is paid again.
    before = {
        c["case_id"]: (
            executions(emu, "answer", c["case_id"]),
            executions(emu, "judge", c["case_id"]),
        )
        for c in cases
    }
    second = run(emu, tmp_path, fixture_dir, "--limit", "6", "--max-attempts", "1")
    assert second.returncode == 0, second.stderr
    assert "Traceback" not in second.stderr
    for c in cases:
        answers, judges = (
            executions(emu, "answer", c["case_id"]),
            executions(emu, "judge", c["case_id"]),
        )
        new_answers = len(answers) - len(before[c["case_id"]][0])
        new_judges = len(judges) - len(before[c["case_id"]][1])
        expected = {judge_fails: (0, 1), answer_fails: (1, 1)}.get(c["case_id"], (0, 0))
        assert (new_answers, new_judges) == expected, c["case_id"]
    assert_no_duplicates(emu)  # every custom_id is new: attempts continue
    rows = rows_of_bytes(run_dir / "results.jsonl")
    order = [c["case_id"] for c in cases]
    assert [r["case_id"] for r in rows] == sorted(
        (r["case_id"] for r in rows), key=order.index
    )  # registry order, a redone case's error row before its new row
    assert Counter(r["case_id"] for r in rows) == Counter(
        {**{c: 1 for c in order}, judge_fails: 2, answer_fails: 2}
    )
    summary = json.loads((run_dir / "results.summary.json").read_text())
    assert summary["completed_cases"] == 6 and summary["errors"] == 0
    assert os.stat(run_dir / "results.summary.json").st_mode & 0o777 == 0o600

    # Timestamps as the reference writes them.
    for r in rows:
        if "score" in r:
            started = datetime.fromisoformat(r["started_at"])
            finished = datetime.fromisoformat(r["finished_at"])
            assert r["elapsed_seconds"] == (finished - started).total_seconds()
            assert started.tzinfo is not None and finished >= started
    stamps = [r["finished_at"] for r in rows]
    assert any(re.search(r"\.\d{6}\+00:00$", s) for s in stamps), stamps

    # summarize never replaces the run's own summary with another selection or digest...
    own = (run_dir / "results.summary.json").read_bytes()
    proc = run_cli("summarize", str(run_dir / "results.jsonl"))
    assert proc.returncode == 2 and "own summary" in proc.stderr, proc.stderr
    assert (run_dir / "results.summary.json").read_bytes() == own
    # ...and with the run's own selection it writes the same bytes the run wrote.
    args = ["summarize", str(run_dir / "results.jsonl"), "--dataset", str(fixture_dir)]
    assert run_cli(*args, "--limit", "6").returncode == 0
    assert (run_dir / "results.summary.json").read_bytes() == own

    # A third run has nothing to do and pays nothing.
    count = len(emu.ledger()["executions"])
    third = run(emu, tmp_path, fixture_dir, "--limit", "6", "--max-attempts", "1")
    assert third.returncode == 0 and len(emu.ledger()["executions"]) == count


def rows_of_bytes(path: Path) -> list[dict]:
    """Rows split on \\n only (an independent reader: no str.splitlines())."""
    return [json.loads(line) for line in path.read_bytes().split(b"\n") if line.strip()]


@pytest.mark.parametrize(
    "refusal",
    [
        {"message": "Temperature must be 1", "type": "invalid_request_error"},
        {"message": "Unsupported value", "param": "temperature", "code": "unsupported_value"},
    ],
)
def test_temperature_refusals_are_recognised_as_the_reference_does(
    batch_emulator_factory, tmp_path, fixture_dir, fixture_dataset, refusal
):
    cases = selected(fixture_dataset, 3)

    class Refuses(Script):
        def reply(self, stage, case, n, body):
            if "temperature" in body:
                return {"status_code": 400, "body": {"error": refusal}}
            return super().reply(stage, case, n, body)

    emu = batch_emulator_factory(latency=0.05, responder=Refuses(cases))
    proc = run(emu, tmp_path, fixture_dir, "--limit", "3")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    rows = rows_of_bytes(tmp_path / "jobs" / ANSWER_MODEL / "results.jsonl")
    assert len(rows) == 3 and all("score" in r for r in rows)
    assert all(r["answer_temperature"] is None and r["judge_temperature"] is None for r in rows)


def test_blank_answers_are_judged_and_empty_ones_are_retried_then_fail(
    batch_emulator_factory, tmp_path, fixture_dir, fixture_dataset
):
    cases = selected(fixture_dataset, 4)
    blank, empty, null, once = (c["case_id"] for c in cases)

    class Contents(Script):
        def reply(self, stage, case, n, body):
            cid = case["case_id"]
            if stage == "answer" and cid == blank:
                return "   "
            if stage == "answer" and cid == empty:
                return ""
            if stage == "answer" and cid == null:
                completion = {
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": None}}],
                }
                return {"status_code": 200, "body": completion}
            if stage == "answer" and cid == once and n == 1:
                return ""
            return super().reply(stage, case, n, body)

    emu = batch_emulator_factory(latency=0.05, responder=Contents(cases))
    proc = run(emu, tmp_path, fixture_dir, "--limit", "4", "--max-retries", "3")
    assert proc.returncode == 1, proc.stderr
    rows = {
        r["case_id"]: r for r in rows_of_bytes(tmp_path / "jobs" / ANSWER_MODEL / "results.jsonl")
    }
    assert rows[blank]["answer"] == "   " and "score" in rows[blank]
    assert "score" in rows[once]
    gave_up = "RuntimeError: API request failed after 3 attempts: API returned an empty message"
    assert rows[empty]["error"] == gave_up and rows[null]["error"] == gave_up
    assert len(executions(emu, "answer", empty)) == 3
    assert len(executions(emu, "answer", once)) == 2
    assert executions(emu, "judge", empty) == []


def test_error_rows_equal_the_reference_with_one_attempt(
    batch_emulator_factory, tmp_path, fixture_dir, fixture_dataset
):
    cases = selected(fixture_dataset, 5)
    overloaded = {"error": {"message": "overloaded", "type": "server_error"}}
    forbidden = {"error": {"message": "no access to model", "code": "model_not_found"}}
    ids = [c["case_id"] for c in cases]

    class Errors(Script):
        def reply(self, stage, case, n, body):
            cid = case["case_id"]
            items = [i["item_id"] for i in case["rubric_items"]]
            if stage == "answer" and cid == ids[0]:
                return {"status_code": 500, "body": overloaded}
            if stage == "answer" and cid == ids[1]:
                return {"status_code": 403, "body": forbidden}
            if stage == "judge" and cid == ids[2]:
                return "Sure! Here you go."
            if stage == "judge" and cid == ids[3]:  # first item missing, one made up
                decisions = [{"item_id": i, "matched": True} for i in items[1:]]
                return json.dumps({"decisions": [*decisions, {"item_id": "zz", "matched": False}]})
            if stage == "judge" and cid == ids[4]:
                return json.dumps({"decisions": [{"item_id": items[0], "matched": "yes"}]})
            return super().reply(stage, case, n, body)

    emu = batch_emulator_factory(latency=0.05, responder=Errors(cases))
    proc = run(emu, tmp_path, fixture_dir, "--limit", "5", "--max-attempts", "1")
    assert proc.returncode == 1, proc.stderr
    rows = {
        r["case_id"]: r for r in rows_of_bytes(tmp_path / "jobs" / ANSWER_MODEL / "results.jsonl")
    }
    items3 = [i["item_id"] for i in cases[3]["rubric_items"]]
    assert {cid: rows[cid]["error"] for cid in ids} == {
        ids[0]: "RuntimeError: API request failed after 6 attempts: HTTP 500: "
        + json.dumps(overloaded),
        ids[1]: "RuntimeError: HTTP 403: " + json.dumps(forbidden),
        ids[2]: "ValueError: invalid judge JSON: Expecting value: line 1 column 1 (char 0)",
        ids[3]: f"ValueError: judge item mismatch; missing={[items3[0]]}, extra=['zz']",
        ids[4]: "ValueError: each judge decision needs string item_id and bool matched",
    }
    assert len(executions(emu, "answer", ids[0])) == 6
    assert len(executions(emu, "answer", ids[1])) == 1
    assert len(executions(emu, "judge", ids[2])) == 1  # not judged again with one attempt
    for row in rows.values():
        assert list(row) == ERROR_KEYS

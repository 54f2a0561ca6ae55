"""The pure collection rules, without HTTP: result lines in the Batch API's format in,
one outcome per request out (reference-behaviour.md sections 2, 3 and 8)."""

from __future__ import annotations

import json

import pytest

from batchbench.bench.dataset import Case
from batchbench.bench.scoring import rubric_frame
from batchbench.engine.collection import RetryLimits, collect
from batchbench.engine.event_records import Line
from batchbench.engine.state import RunState, fold
from batchbench.engine.submission import Submission
from batchbench.kinds import Stage
from batchbench.providers.base import BatchError, BatchView
from batchbench.providers.openai_wire import OpenAIWire

CASES: list[Case] = [
    {
        "case_id": f"c{i}",
        "benchmark": "b",
        "grading_method": "points_rubric",
        "prompt": f"p{i}",
        "rubric_items": [
            {"item_id": f"c{i}_0", "text": "t", "points": 2},
            {"item_id": f"c{i}_1", "text": "t", "points": -1},
        ],
        "split": "test",
    }
    for i in range(4)
]
LIMITS = RetryLimits(max_retries=6, max_attempts=3, hold_seconds=60.0)


def ok(cid: str, content):
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
    return {"custom_id": cid, "response": {"status_code": 200, "body": body}, "error": None}


def http(cid: str, status: int, body: dict):
    return {"custom_id": cid, "response": {"status_code": status, "body": body}, "error": None}


def line_error(cid: str, code: str):
    return {"custom_id": cid, "response": None, "error": {"code": code, "message": "m"}}


def submission(stage: Stage, sent_temperature: bool = True, n: int = 4) -> Submission:
    lines = [Line(f"c{i}", 1, sent_temperature) for i in range(n)]
    ended = BatchView("b", "completed", "ended", "completed", files=("out",))
    return Submission("s", stage, 1, "s.jsonl", lines, 0.0, view=ended)


def run_collect(tmp_path, stage, records, state: RunState | None = None, sent=True, limits=LIMITS):
    path = tmp_path / "out.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    sub = submission(stage, sent)
    state = state or fold([c["case_id"] for c in CASES], [])
    for line in sub.lines:
        state.cases[line.case_id].stage(stage).sub = sub.id
        if not sent:  # refused before: its wire's fallback says so
            state.cases[line.case_id].stage(stage).adjust = {"temperature": False}
    items = {c["case_id"]: [it["item_id"] for it in c["rubric_items"]] for c in CASES}
    wire = OpenAIWire()
    frame = wire.read_results([path])
    return collect(sub, frame, state, limits, rubric_frame(CASES), items, 100.0, wire)


def kinds(result):
    return {o.case_id: (o.kind, o.detail) for o in result.outcomes.values()}


def test_answers_what_is_retried_and_what_fails(tmp_path):
    overloaded = {"error": {"message": "overloaded"}}
    bad = {"error": {"message": "Invalid value for max_completion_tokens"}}
    result = run_collect(
        tmp_path,
        "answers",
        [
            ok("answer:c0", "   "),  # blank: an answer
            ok("answer:c1", ""),  # empty: retried
            http("answer:c2", 500, overloaded),
            http("answer:c3", 400, bad),
        ],
    )
    assert kinds(result) == {
        "c0": ("ok", None),
        "c1": ("transient", "API returned an empty message"),
        "c2": ("transient", "HTTP 500: " + json.dumps(overloaded)),
        "c3": ("failed", "RuntimeError: HTTP 400: " + json.dumps(bad)),
    }


@pytest.mark.parametrize("sent,kind", [(True, "retry"), (False, "failed")])
def test_a_temperature_refusal_is_resent_only_when_temperature_was_sent(tmp_path, sent, kind):
    refusal = {"error": {"message": "Unsupported value", "param": "temperature"}}
    result = run_collect(
        tmp_path, "answers", [http(f"answer:c{i}", 400, refusal) for i in range(4)], sent=sent
    )
    assert {k for k, _ in kinds(result).values()} == {kind}
    if sent:  # sent again without it: the wire's own fallback, journaled as it wrote it
        assert {json.dumps(o.adjust) for o in result.outcomes.values()} == {
            '{"temperature": false}'
        }


def test_batch_line_errors_and_missing_lines(tmp_path):
    result = run_collect(
        tmp_path,
        "answers",
        [line_error("answer:c0", "batch_expired"), line_error("answer:c1", "invalid_request")],
    )
    # What the service lost is sent again without spending the request's retries.
    assert kinds(result) == {
        "c0": ("lost", "batch_expired"),
        "c1": ("failed", "BatchLineError: invalid_request: m"),
        "c2": ("lost", "no result line"),
        "c3": ("lost", "no result line"),
    }


def test_what_the_service_loses_does_not_spend_the_retries(tmp_path):
    """Status-0 lines and an expired batch's 5xx rows are the service's losses; a
    request lost 3 x --max-retries times fails, saying so."""
    state = fold([c["case_id"] for c in CASES], [])
    state.cases["c0"].answers.transients = 5  # one retry left for its own replies
    state.cases["c3"].answers.losses = 17  # this is its eighteenth loss: 3 x 6
    zero = {"custom_id": "answer:c0", "response": {"status_code": 0, "body": None}}
    result = run_collect(
        tmp_path,
        "answers",
        [
            zero,
            http("answer:c1", 500, {}),
            ok("answer:c2", "fine"),
            zero | {"custom_id": "answer:c3"},
        ],
        state=state,
    )
    got = kinds(result)
    assert got["c0"][0] == "lost" and got["c1"][0] == "transient" and got["c2"][0] == "ok"
    assert got["c3"] == (
        "failed",
        "RuntimeError: the batch service lost this request 18 times (last: HTTP 0: null)",
    )
    assert got["c0"] == ("lost", "HTTP 0: null")


def test_the_last_retry_fails_with_the_references_text(tmp_path):
    state = fold([c["case_id"] for c in CASES], [])
    state.cases["c0"].answers.transients = 5  # five attempts used up already
    result = run_collect(tmp_path, "answers", [ok("answer:c0", None)], state=state)
    assert kinds(result)["c0"] == (
        "failed",
        "RuntimeError: API request failed after 6 attempts: API returned an empty message",
    )


def test_judges_are_parsed_strictly_and_judged_again_until_the_cap(tmp_path):
    state = fold([c["case_id"] for c in CASES], [])
    state.cases["c1"].judges.invalid = 2  # this is its third invalid reply
    valid = json.dumps(
        {"decisions": [{"item_id": "c0_1", "matched": False}, {"item_id": "c0_0", "matched": True}]}
    )
    result = run_collect(
        tmp_path,
        "judges",
        [ok("judge:c0", valid), ok("judge:c1", "nope"), ok("judge:c2", "nope")],
        state=state,
    )
    not_json = "ValueError: invalid judge JSON: Expecting value: line 1 column 1 (char 0)"
    got = kinds(result)
    assert got["c0"] == ("ok", None)
    assert got["c1"] == ("failed", not_json) and got["c2"] == ("invalid", not_json)
    # The decisions come back in rubric order, joined by item id.
    assert result.judged is not None
    decided = result.judged.decided
    assert decided.select("item_id", "matched").rows() == [("c0_0", True), ("c0_1", False)]


def test_a_batch_over_the_token_limit_is_sent_again_smaller_and_later(tmp_path):
    sub = submission("answers")
    error = BatchError("token_limit_exceeded", "Enqueued token limit reached")
    sub.view = BatchView("b", "failed", "ended", "failed", errors=(error,))
    state = fold([c["case_id"] for c in CASES], [])
    result = collect(sub, None, state, LIMITS, rubric_frame(CASES), {}, 100.0, OpenAIWire())
    assert {o.kind for o in result.outcomes.values()} == {"transient"}
    assert result.free_retry and result.cap == 2 and result.hold_until == 160.0
    event = result.event(sub)
    assert event.cap == 2 and set(event.outcomes) == {"c0", "c1", "c2", "c3"}

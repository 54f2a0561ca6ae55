"""Prompts and judge replies: byte-exact with the spec, strict like the reference."""

from __future__ import annotations

import re

import pytest

from batchbench import protocol
from batchbench.errors import JudgeReplyError


@pytest.fixture(scope="module")
def spec(shared_dir):
    return (shared_dir / "spec" / "reference-behaviour.md").read_text()


def test_answer_system_message_matches_spec(spec):
    block = spec[spec.index("Answer system message, exactly") :]
    quoted = re.search(r"`(You are a physician[^`]*)`", block, re.S).group(1)
    expected = " ".join(line.strip() for line in quoted.splitlines())
    assert expected == protocol.ANSWER_SYSTEM_MESSAGE


def test_judge_system_message_matches_spec(spec):
    block = spec[spec.index("Judge system message, exactly") :]
    text = re.search(r"```text\n(.*?)\n```", block, re.S).group(1)
    assert text == protocol.JUDGE_SYSTEM_MESSAGE


def test_judge_user_message_layout_and_points_format():
    case = {
        "prompt": "P?",
        "rubric_items": [
            {"item_id": "h_0", "text": "two", "points": 2},
            {"item_id": "h_1", "text": "minus", "points": -1},
            {"item_id": "h_2", "text": "zero", "points": 0},
            {"item_id": "h_3", "text": "half", "points": 1.5},
        ],
    }
    assert protocol.judge_user_message(case, "A!") == (
        "CLINICAL PROMPT:\nP?\n\nANSWER:\nA!\n\nRUBRIC ITEMS:\n"
        "[h_0] points=+2 :: two\n[h_1] points=-1 :: minus\n"
        "[h_2] points=+0 :: zero\n[h_3] points=+1.5 :: half"
    )


def test_request_bodies():
    case = {"prompt": "Q", "rubric_items": [{"item_id": "x_0", "text": "t", "points": 1}]}
    body = protocol.answer_body(case, "m", reasoning_effort="max")
    assert body["messages"][1] == {"role": "user", "content": "Q"}
    assert body["max_completion_tokens"] == 32000 and body["temperature"] == 1
    assert body["reasoning_effort"] == "xhigh"
    assert "temperature" not in protocol.answer_body(case, "m", temperature=None)
    judge = protocol.judge_body(case, "ans", "j")
    assert judge["response_format"] == {"type": "json_object"}
    assert judge["max_completion_tokens"] == 5000 and judge["temperature"] == 0
    assert judge["messages"][0]["content"] == protocol.JUDGE_SYSTEM_MESSAGE


IDS = ["a_0", "a_1"]


def test_valid_reply_parses():
    reply = '{"decisions":[{"item_id":"a_1","matched":false},{"item_id":"a_0","matched":true}]}'
    assert protocol.parse_judge_reply(reply, IDS) == {"a_0": True, "a_1": False}


@pytest.mark.parametrize(
    "reply,message",
    [
        ("", "empty"),
        ("not json", "not JSON"),
        ('[{"item_id":"a_0","matched":true}]', "must be a JSON object, got list"),
        ('{"answers": []}', "no 'decisions' list"),
        ('{"decisions": [1]}', "decisions[0] must be an object"),
        (
            '{"decisions":[{"item_id":"a_0","matched":"true"},{"item_id":"a_1","matched":true}]}',
            "matched must be a boolean, got 'true'",
        ),
        (
            '{"decisions":[{"item_id":"a_0","matched":1},{"item_id":"a_1","matched":true}]}',
            "matched must be a boolean, got 1",
        ),
        ('{"decisions":[{"item_id":0,"matched":true}]}', "item_id must be a string"),
        (
            '{"decisions":[{"item_id":"a_0","matched":true},{"item_id":"a_0","matched":true}]}',
            "duplicate judge decision for item_id 'a_0'",
        ),
        ('{"decisions":[{"item_id":"a_0","matched":true}]}', "missing=['a_1'], extra=[]"),
        (
            '{"decisions":[{"item_id":"a_0","matched":true},{"item_id":"a_1","matched":true},'
            '{"item_id":"zz","matched":false}]}',
            "missing=[], extra=['zz']",
        ),
    ],
)
def test_invalid_replies_say_what_is_wrong(reply, message):
    with pytest.raises(JudgeReplyError) as err:
        protocol.parse_judge_reply(reply, IDS)
    assert message in str(err.value)


def test_temperature_rejection_rule():
    body = {"error": {"message": "Unsupported value: 'temperature' does not support 0"}}
    assert protocol.rejects_temperature(400, body)
    assert not protocol.rejects_temperature(500, body)
    assert not protocol.rejects_temperature(400, {"error": {"message": "bad max_tokens"}})


def test_frame_judge_path_agrees_with_the_strict_parser():
    """Canonical replies are decoded by polars, the rest by the parser: same verdicts."""
    import json

    import polars as pl

    from batchbench.outputs import judge_decisions
    from batchbench.scoring import rubric_frame

    ids = ["h_0", "h_1", "h_2"]
    good = [{"item_id": i, "matched": k % 2 == 0} for k, i in enumerate(ids)]
    replies = {
        "canonical": json.dumps({"decisions": good}),
        "compact": json.dumps({"decisions": good}, separators=(",", ":")),
        "reordered keys": json.dumps(
            {"decisions": [{"matched": d["matched"], "item_id": d["item_id"]} for d in good]}
        ),
        "extra keys": json.dumps({"note": "x", "decisions": [dict(d, why="y") for d in good]}),
        "shuffled": json.dumps({"decisions": good[::-1]}),
        "not json": "{decisions:",
        "list": json.dumps(good),
        "no decisions": json.dumps({"d": good}),
        "string bool": json.dumps({"decisions": [dict(good[0], matched="false"), *good[1:]]}),
        "duplicate": json.dumps({"decisions": [*good, good[0]]}),
        "missing": json.dumps({"decisions": good[:2]}),
        "extra id": json.dumps({"decisions": [*good, {"item_id": "h_9", "matched": True}]}),
        "other case's id": json.dumps(
            {"decisions": [*good[:2], {"item_id": "g_2", "matched": True}]}
        ),
        "pretty": json.dumps({"decisions": good}, indent=2),
        "id holding true}": json.dumps(
            {"decisions": [*good, {"item_id": "x true} ", "matched": False}]}
        ),
        "only an id holding true}": json.dumps(
            {"decisions": [*good[:2], {"item_id": "h_2 true}", "matched": True}]}
        ),
        "empty": "",
        "empty list": json.dumps({"decisions": []}),
    }
    cases = [
        {
            "case_id": name,
            "grading_method": "points_rubric",
            "rubric_items": [{"item_id": i, "text": "t", "points": 1} for i in ids],
        }
        for name in replies
    ]
    frame = pl.DataFrame({"case_id": list(replies), "content": list(replies.values())})
    decisions, invalid = judge_decisions(frame, rubric_frame(cases))
    got = {}
    for case_id, item_id, matched in decisions.select("case_id", "item_id", "matched").iter_rows():
        got.setdefault(case_id, {})[item_id] = matched
    for name, content in replies.items():
        try:
            expected = protocol.parse_judge_reply(content, ids)
        except JudgeReplyError as exc:
            assert invalid.get(name) == str(exc), name
            assert name not in got
        else:
            assert got.get(name) == expected and name not in invalid, name

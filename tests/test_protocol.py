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

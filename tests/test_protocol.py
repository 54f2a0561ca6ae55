"""Prompts and judge replies: byte-exact with the spec, strict like the reference."""

from __future__ import annotations

import json
import re

import pytest

from batchbench.bench import protocol
from batchbench.engine.requests import build_request
from batchbench.errors import JudgeReplyError
from batchbench.providers.openai_wire import OpenAIWire


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
    case = {
        "case_id": "c",
        "prompt": "Q",
        "rubric_items": [{"item_id": "x_0", "text": "t", "points": 1}],
    }
    wire = OpenAIWire()
    answer = build_request(wire, "answers", case, "m", 1, "r" * 32, reasoning_effort="max")
    body = answer.rendered.body
    assert body["messages"][1] == {"role": "user", "content": "Q"}
    assert body["max_completion_tokens"] == 32000 and body["temperature"] == 1
    assert body["reasoning_effort"] == "xhigh"
    retry = build_request(wire, "answers", case, "m", 2, "r" * 32, adjust={"temperature": False})
    # The id carries the run's token (the run id's first 8 characters), stage and attempt.
    assert "temperature" not in retry.rendered.body and retry.custom_id == "rrrrrrrr-a2-c"
    judge = build_request(wire, "judges", case, "j", 1, "r" * 32, answer="ans").rendered.body
    assert judge["response_format"] == {"type": "json_object"}
    assert judge["max_completion_tokens"] == 5000 and judge["temperature"] == 0
    assert judge["messages"][0]["content"] == protocol.JUDGE_SYSTEM_MESSAGE
    # The line's bytes: the reference's body, key order included, in the Batch API's
    # line (compact JSON, non-ASCII kept), as the 0.1 release wrote it (but for the id,
    # now marked with the run's token).
    expected = {
        "custom_id": "rrrrrrrr-a1-c",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": "m",
            "messages": [
                {"role": "system", "content": protocol.ANSWER_SYSTEM_MESSAGE},
                {"role": "user", "content": "Q"},
            ],
            "max_completion_tokens": 32000,
            "temperature": 1,
            "reasoning_effort": "xhigh",
        },
    }
    assert answer.line == (json.dumps(expected, separators=(",", ":")) + "\n").encode()


IDS = ["a_0", "a_1"]


def test_valid_reply_parses():
    reply = '{"decisions":[{"item_id":"a_1","matched":false},{"item_id":"a_0","matched":true}]}'
    assert protocol.parse_judge_reply(reply, IDS) == {"a_0": True, "a_1": False}


IDS12 = [f"a_{i}" for i in range(12)]


@pytest.mark.parametrize(
    "reply,error",
    [
        # The reference's texts (reference-behaviour.md section 8): `Type: message`.
        (
            '{"decisions": [tru',
            "ValueError: invalid judge JSON: Expecting value: line 1 column 16 (char 15)",
        ),
        ("not json", "ValueError: invalid judge JSON: Expecting value: line 1 column 1 (char 0)"),
        ('{"answers": []}', "ValueError: invalid judge JSON: 'decisions'"),
        (
            '[{"item_id":"a_0","matched":true}]',
            "ValueError: invalid judge JSON: list indices must be integers or slices, not str",
        ),
        ('{"decisions": [1]}', "AttributeError: 'int' object has no attribute 'get'"),
        ('{"decisions": "ab"}', "AttributeError: 'str' object has no attribute 'get'"),
        (
            '{"decisions":[{"item_id":"a_0","matched":"true"},{"item_id":"a_1","matched":true}]}',
            "ValueError: each judge decision needs string item_id and bool matched",
        ),
        (
            '{"decisions":[{"item_id":"a_0","matched":1},{"item_id":"a_1","matched":true}]}',
            "ValueError: each judge decision needs string item_id and bool matched",
        ),
        (
            '{"decisions":[{"item_id":0,"matched":true}]}',
            "ValueError: each judge decision needs string item_id and bool matched",
        ),
        (
            '{"decisions":[{"item_id":"a_0","matched":true},{"item_id":"a_0","matched":true}]}',
            "ValueError: duplicate judge decision for a_0",
        ),
        (
            '{"decisions":[{"item_id":"a_0","matched":true}]}',
            "ValueError: judge item mismatch; missing=['a_1'], extra=[]",
        ),
        (
            '{"decisions":[{"item_id":"a_0","matched":true},{"item_id":"a_1","matched":true},'
            '{"item_id":"zz","matched":false}]}',
            "ValueError: judge item mismatch; missing=[], extra=['zz']",
        ),
    ],
)
def test_invalid_replies_say_what_the_reference_says(reply, error):
    with pytest.raises(JudgeReplyError) as err:
        protocol.parse_judge_reply(reply, IDS)
    assert str(err.value) == error


def test_a_mismatch_lists_ids_sorted_as_strings():
    reply = json.dumps(
        {"decisions": [{"item_id": "a_0", "matched": True}, {"item_id": "b", "matched": True}]}
    )
    with pytest.raises(JudgeReplyError) as err:
        protocol.parse_judge_reply(reply, IDS12)
    missing = sorted(IDS12[1:])  # strings: a_1, a_10, a_11, a_2, ...
    assert missing[:3] == ["a_1", "a_10", "a_11"]
    assert str(err.value) == f"ValueError: judge item mismatch; missing={missing}, extra=['b']"


@pytest.mark.parametrize(
    "status,body,refused",
    [
        (400, {"error": {"message": "Unsupported value: 'temperature' does not support 0"}}, True),
        (400, {"error": {"message": "Temperature must be 1", "param": None}}, True),
        (400, {"error": {"message": "Unsupported value", "param": "temperature"}}, True),
        (400, {"error": {"message": "bad", "code": "TEMPERATURE_UNSUPPORTED"}}, True),
        (500, {"error": {"message": "temperature"}}, False),
        (400, {"error": {"message": "bad max_tokens"}}, False),
    ],
)
def test_temperature_rejection_rule(status, body, refused):
    assert protocol.rejects_temperature(status, json.dumps(body)) is refused


def _plain_reference_parse(content: str, item_ids: list[str]):
    """The reference's steps written plainly with json.loads: (decisions, None) or
    (None, error text). An independent oracle for protocol.parse_judge_reply."""
    try:
        try:
            payload = json.loads(content)
            decisions = payload["decisions"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"invalid judge JSON: {exc}") from exc
        found = {}
        for entry in decisions:
            item_id = entry.get("item_id")
            matched = entry.get("matched")
            if not isinstance(item_id, str) or not isinstance(matched, bool):
                raise ValueError("each judge decision needs string item_id and bool matched")
            if item_id in found:
                raise ValueError(f"duplicate judge decision for {item_id}")
            found[item_id] = matched
        if set(found) != set(item_ids):
            missing = sorted(set(item_ids) - set(found))
            extra = sorted(set(found) - set(item_ids))
            raise ValueError(f"judge item mismatch; missing={missing}, extra={extra}")
        return found, None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"[:2000]


MUTATIONS = [
    ("true", "false"),
    ("false", "true"),
    ('"matched"', '"Matched"'),
    ("true", "1"),
    ("false", "NaN"),
    ("true", "Infinity"),
    (": ", ":"),
    ("}", "}}"),
    ("[", "[["),
    ('"a_1"', '"a_0"'),
    ('"a_0"', '"a_\\u0030"'),
    ('"a_1"', '"\\ud800"'),
    ("{", '{"decisions": 5, '),
    ("true", "1" * 5000),
    ("true", "1e400"),
    ('"item_id"', '"item_id": "a_0", "item_id"'),
    # shapes the typed fast path must hand to the reference's steps, or read alike
    ('{"decisions"', '{"note": "x", "decisions"'),
    ('{"decisions"', '{"decisions": [], "decisions"'),
    ('"matched"', '"why": 1' + "0" * 4400 + ', "matched"'),
    ('"matched"', '"why": null, "matched"'),
    ("[{", "[null, {"),
]


def test_parsing_agrees_with_a_plain_reference_on_random_replies():
    import random

    rng = random.Random(7)
    checked = 0
    for _ in range(3000):
        decisions = [{"item_id": i, "matched": rng.random() < 0.5} for i in IDS]
        rng.shuffle(decisions)
        text = json.dumps({"decisions": decisions}, separators=rng.choice([None, (",", ":")]))
        for _ in range(rng.randint(0, 3)):
            old, new = rng.choice(MUTATIONS)
            if old in text:
                at = rng.choice([m.start() for m in re.finditer(re.escape(old), text)])
                text = text[:at] + new + text[at + len(old) :]
        if rng.random() < 0.1:
            text = text[: rng.randint(0, len(text))]
        expected = _plain_reference_parse(text, IDS)
        try:
            got = (protocol.parse_judge_reply(text, IDS), None)
        except JudgeReplyError as exc:
            got = (None, str(exc))
        assert got == expected, text
        # The same verdict laid out in rubric order (the frames' form), or the same error.
        try:
            laid = (protocol.judge_matches(text, IDS), None)
        except JudgeReplyError as exc:
            laid = (None, str(exc))
        found, error = expected
        assert laid == (None if found is None else [found[i] for i in IDS], error), text
        checked += 1
    assert checked == 3000


def test_request_lines_are_the_bytes_json_dumps_writes():
    """encode_line (msgspec) against the plain rule it stands for: compact json.dumps,
    non-ASCII kept, UTF-8 — on random texts with controls, quotes, escapes and emoji."""
    import random

    from batchbench.providers.checks import encode_line

    rng = random.Random(5)
    alphabet = [chr(c) for c in range(0, 0x80)] + ["é", "中", "😀", "\u2028", "\u0301", "\\"]
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        obj = {
            "custom_id": text[:8],
            "body": {"messages": [{"role": "user", "content": text}], "temperature": 1},
            "n": [0, 1.0, 0.5, -3, True, False, None, {"k": text}],
        }
        expected = (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        assert encode_line(obj) == expected, text

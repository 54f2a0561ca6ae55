"""OpenAI-shaped output files → the common frame, checked line by line against
``json.loads`` of each line and the documented reading rule (the Batch API's output
line: ``custom_id``, ``response.status_code``/``body``, ``error``; the answer is
``choices[0].message.content`` when it is a string, usage from ``body.usage``).

A good day's file (every reply a 2xx chat completion with text content) is read in one
pass; any other file by the full reading. Both must say the same of every line.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from batchbench.errors import BatchFileError
from batchbench.providers import frames, openai_results
from batchbench.providers.frames import USAGE_COLUMNS

TEXTS = ["plain", 'quote " and \\ backslash', "line\nbreak\ttab", "é😀\u2028", "", "%(x)s"]


def _good(rng: random.Random, n: int) -> dict[str, Any]:
    usage = {
        "prompt_tokens": rng.randint(1, 900),
        "completion_tokens": rng.randint(1, 90),
        "prompt_tokens_details": rng.choice([{"cached_tokens": 5}, None, {}]),
    }
    if rng.random() < 0.5:
        usage["completion_tokens_details"] = {"reasoning_tokens": 3}
    body: dict[str, Any] = {
        "id": f"chatcmpl-{n}",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": rng.choice(TEXTS)}}],
        "usage": usage if rng.random() < 0.9 else None,
        "extra": {"nested": [1, {"x": None}]},
    }
    if rng.random() < 0.1:
        body["choices"][0]["message"]["content"] = None
    if rng.random() < 0.05:
        body["choices"] = []
    return {"status_code": 200, "request_id": "r", "body": body}


def _lines(rng: random.Random, bad_day: bool) -> list[dict[str, Any]]:
    lines = []
    for n in range(60):
        line: dict[str, Any] = {"id": f"batch_req_{n}", "custom_id": f"answer:c{n}", "error": None}
        roll = rng.random()
        if roll < 0.1:
            line["response"] = None
            line["error"] = {"code": "batch_expired", "message": "This request expired."}
        else:
            line["response"] = _good(rng, n)
        lines.append(line)
    if bad_day:
        lines[3]["response"] = {
            "status_code": 400,
            "body": {"error": {"message": "temperature is not supported", "param": "temperature"}},
        }
        lines[5]["response"]["body"]["choices"] = [{"message": {"content": [{"type": "text"}]}}]
        lines[7]["response"] = {"status_code": 200, "body": "a string body"}
    return lines


def _expected(line: dict) -> dict:
    """One line's row by the reading rule, from ``json.loads`` of the line."""
    r, e = line.get("response"), line.get("error")
    body = r.get("body") if r else None
    ok = r is not None and 200 <= r["status_code"] < 300
    message = None
    if isinstance(body, dict) and body.get("choices"):
        message = body["choices"][0].get("message")
    content = message.get("content") if message else None
    usage = (body.get("usage") if isinstance(body, dict) else None) or {}
    details = usage.get("prompt_tokens_details") or {}
    reasoning = usage.get("completion_tokens_details") or {}
    return {
        "custom_id": line["custom_id"],
        "status_code": r["status_code"] if r else None,
        "has_response": r is not None,
        "has_error": e is not None,
        "error_code": e["code"] if e else None,
        "error_message": e["message"] if e else None,
        "body_text": None if r is None or ok else json.dumps(body),
        "content": content if isinstance(content, str) else None,
        "prompt_tokens": usage.get("prompt_tokens") or 0,
        "cached_tokens": details.get("cached_tokens") or 0,
        "completion_tokens": usage.get("completion_tokens") or 0,
        "reasoning_tokens": reasoning.get("reasoning_tokens") or 0,
        "cache_write_5m_tokens": 0,  # OpenAI's chat usage has no cache writes
        "cache_write_1h_tokens": 0,
    }


@pytest.mark.parametrize("bad_day", [False, True], ids=["good day", "a failed reply"])
@pytest.mark.parametrize("seed", range(3))
def test_every_line_reads_as_its_json_says(tmp_path, monkeypatch, seed, bad_day):
    rng = random.Random(seed)
    lines = _lines(rng, bad_day)
    paths = []
    for f in range(2):
        path = tmp_path / f"out-{f}.jsonl"
        path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines[f::2]))
        paths.append(path)
    if not bad_day:  # read in one pass: the full reading is not asked
        monkeypatch.setattr(openai_results, "outputs_frame", _not_called)
    frame = openai_results.read_outputs(paths, "empty!")
    columns = ["custom_id", "status_code", "has_response", "has_error", "error_code"]
    columns += ["error_message", "body_text", "content", *USAGE_COLUMNS]
    got = frame.select(columns).to_dicts()
    want = [_expected(x) for x in lines[0::2] + lines[1::2]]
    assert got == want
    assert frame["file"].to_list() == [str(paths[0])] * 30 + [str(paths[1])] * 30
    assert frame["lineno"].to_list() == [*range(1, 31)] * 2
    assert frame["empty_error"].unique().to_list() == ["empty!"]


def _not_called(*args: object) -> None:
    raise AssertionError("a good day's file was read twice")


def test_a_line_that_is_not_an_output_line_is_that_lines_failure_named(tmp_path):
    """#61.11: a reply whose body does not fit the documented form is that line's failure
    (a 500, retried as a passing one is), named; the file's other lines read as ever."""
    path = Path(tmp_path / "out.jsonl")
    good = {"custom_id": "answer:a", "response": _good(random.Random(1), 1), "error": None}
    bad = {"custom_id": "answer:b", "response": {"status_code": 200, "body": {"choices": 7}}}
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    frame = openai_results.read_outputs([path], "empty")
    [row] = frame.filter(frame["custom_id"] == "answer:b").to_dicts()
    assert row["status_code"] == 500 and row["content"] is None
    assert "out.jsonl: line 2" in row["body_text"] and "response.body" in row["body_text"]
    [kept] = frame.filter(frame["custom_id"] == "answer:a").to_dicts()
    assert kept["status_code"] == 200


@pytest.mark.parametrize("seed", range(40))
def test_a_file_is_utf8_exactly_when_python_decodes_it(tmp_path, seed):
    """check_utf8 reads a chunk at a time and passes ASCII chunks by; the oracle is
    ``bytes.decode`` of the whole file, and the first line it refuses."""
    rng = random.Random(seed)
    text = "".join(rng.choice(["a", "{", "\n", "é", "😀", "\u2028", " "]) for _ in range(300))
    data = bytearray(text.encode() + b"x" * rng.randrange(40))  # an ASCII tail, or none
    for _ in range(rng.choice([0, 0, 1, 2])):  # a stray byte: a lead, a continuation, 0xFF
        data[rng.randrange(len(data))] = rng.choice([0xC3, 0x80, 0xFF, 0xF0])
    if seed % 5 == 0:  # a character cut off where only ASCII follows
        data[len(text.encode()) : len(text.encode()) + 1] = b"\xc3"
    path = tmp_path / "out.jsonl"
    try:
        bytes(data).decode("utf-8")
        bad = None
    except UnicodeDecodeError:
        bad = next(n for n, line in enumerate(bytes(data).split(b"\n"), 1) if not _decodes(line))
    chunk = rng.choice([1, 2, 3, 7, 64])  # chunks end inside characters
    if bad is None:
        frames.check_utf8(bytes(data), path, chunk=chunk)
    else:
        with pytest.raises(BatchFileError, match=rf"out.jsonl: line {bad}: not UTF-8 text$"):
            frames.check_utf8(bytes(data), path, chunk=chunk)


def _decodes(line: bytes) -> bool:
    try:
        line.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False

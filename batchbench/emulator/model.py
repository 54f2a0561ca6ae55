"""The simulated model behind every executed chat-completion line.

Default behaviour, deterministic so tests can predict it:

* an **answer** request (anything that is not a judge request) gets
  ``"Simulated answer (<model>): <the first 120 characters of the user message>"``;
* a **judge** request (``response_format`` ``json_object`` and rubric lines
  ``[item_id] points=… :: …`` in the user message) gets a valid
  ``{"decisions": [...]}`` reply with one decision per rubric line, in order,
  where item ``i`` is matched exactly when the first hex digit of
  ``md5(item_id + "|" + answer)`` is below 8 (``answer`` is the text between
  ``ANSWER:\\n`` and ``\\n\\nRUBRIC ITEMS:``) — see :func:`judge_matches`.

A **responder** replaces this: a callable that receives the request ``body``
and returns a string (the assistant content of a 200 reply), a dict
``{"status_code": int, "body": dict}`` used as the line's response as is, or a
dict ``{"error": {"code": str, "message": str}}`` for a non-HTTP line failure
(such as ``request_timeout``). It is called exactly once per executed line.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .endpoints import check_body, request_text, shape

Responder = Callable[[dict[str, Any]], Any]

_RUBRIC_LINE = re.compile(r"^\[([^\]]+)\] points=\S+ :: ", re.M)


def estimate_tokens(text: str) -> int:
    """A documented stand-in for a tokenizer: one token per four characters."""
    return max(1, -(-len(text) // 4))


def prompt_tokens(body: dict[str, Any]) -> int:
    messages = body.get("messages") or []
    text = "".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    return estimate_tokens(text)


def _user_text(body: dict[str, Any]) -> str:
    """What the simulated model reads: messages, or a Response's ``input``, or ``prompt``."""
    return request_text(body)


def is_judge_request(body: dict[str, Any]) -> bool:
    fmt = body.get("response_format")
    return (
        isinstance(fmt, dict)
        and fmt.get("type") == "json_object"
        and bool(_RUBRIC_LINE.search(_user_text(body)))
    )


def judged_answer(user_text: str) -> str:
    start = user_text.find("ANSWER:\n")
    end = user_text.rfind("\n\nRUBRIC ITEMS:")
    if start < 0 or end < start:
        return ""
    return user_text[start + len("ANSWER:\n") : end]


def judge_matches(item_id: str, answer: str) -> bool:
    """The default judge's rule: first hex digit of md5(item_id|answer) below 8."""
    return hashlib.md5(f"{item_id}|{answer}".encode()).hexdigest()[0] < "8"


def default_content(body: dict[str, Any]) -> str:
    text = _user_text(body)
    if is_judge_request(body):
        answer = judged_answer(text)
        decisions = [
            {"item_id": item_id, "matched": judge_matches(item_id, answer)}
            for item_id in _RUBRIC_LINE.findall(text)
        ]
        return json.dumps({"decisions": decisions})
    return f"Simulated answer ({body.get('model')}): {text[:120]}"


def run_line(
    body: dict[str, Any],
    request_id: str,
    responder: Responder | None,
    endpoint: str = "/v1/chat/completions",
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``(response, error)`` for one executed line, as the output file records them.

    A body its endpoint refuses is a 400 row (the responder is not asked); a text
    reply gets the endpoint's shape.
    """
    refusal = check_body(endpoint, body)
    if refusal is not None:
        return {**refusal, "request_id": request_id}, None
    result = responder(body) if responder is not None else default_content(body)
    if isinstance(result, str):
        reply = shape(endpoint, body, result, request_id)
        return {"status_code": 200, "request_id": request_id, "body": reply}, None
    if isinstance(result, dict) and isinstance(result.get("error"), dict):
        return None, {
            "code": result["error"].get("code"),
            "message": result["error"].get("message"),
        }
    if isinstance(result, dict) and isinstance(result.get("status_code"), int):
        return {
            "status_code": result["status_code"],
            "request_id": request_id,
            "body": result.get("body"),
        }, None
    raise TypeError(f"responder returned {type(result).__name__}; expected str or dict")


def load_responder(spec: str) -> Responder:
    """``FILE.py:FUNCTION`` → the callable, loaded from that file."""
    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text or not name:
        raise ValueError(f"responder must be FILE.py:FUNCTION, got {spec!r}")
    path = Path(path_text)
    if not path.is_file():
        raise ValueError(f"responder file not found: {path}")
    module_spec = importlib.util.spec_from_file_location(f"_responder_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise ValueError(f"cannot load responder file {path}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"{path} has no callable {name!r}")
    return fn
